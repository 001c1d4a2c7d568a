"""The duplicate index as ``crawlproject status`` shows it (either layout)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from redis.asyncio import Redis

from crawlproject.dedupe.layout import near_tables
from crawlproject.dedupe.spread import Spread
from crawlproject.frontier.store.keys import CrawlKeys
from crawlproject.frontier.store.script_replies import reply_text


async def index_figures(redis: Redis, keys: CrawlKeys) -> dict[str, Any]:
    """The duplicate index as ``crawlproject status`` shows it: pages stored in
    it, exact and near duplicates it found (fleet-wide), and its layout
    (``growing``; ``fixed``: the buckets of an index from before, never split;
    ``none``: no page checked yet), its near tables and their level (spread
    over ``parts``: the counters are the parts' sums)."""
    pipe = redis.pipeline(transaction=False)
    pipe.hgetall(keys.dedupe_config)
    pipe.hgetall(keys.dedupe_counters)
    cfg_raw, counts_raw = await pipe.execute()
    cfg = {reply_text(k): reply_text(v) for k, v in cfg_raw.items()}
    counts = {reply_text(k): int(v) for k, v in counts_raw.items()}
    figures: dict[str, Any] = {
        "pages": counts.get("new", 0),
        "exact": counts.get("exact", 0),
        "near": counts.get("near", 0),
        "layout": "none",
        "near_tables": 0,
        "near_level": None,
    }
    if "parts" in cfg:
        k, blocks, parts = int(cfg["k"]), int(cfg["b"]), int(cfg["parts"])
        layout = Spread(keys.crawl, k, blocks, parts, int(cfg["load"]), int(cfg["nmin"]))
        figures |= await spread_figures(redis, layout)
        figures |= {"layout": "growing", "near_tables": len(layout.tables), "parts": layout.parts}
    elif "k" in cfg:
        k = int(cfg["k"])
        blocks = int(cfg.get("b", k + 1))
        figures["layout"] = "growing" if "b" in cfg else "fixed"
        figures["near_tables"] = len(near_tables(k, blocks))
        if "b" in cfg:
            figures["near_level"] = int(cfg.get("nL", cfg.get("nmin", 0)))
    return figures


async def spread_figures(redis: Redis, spread: Spread) -> dict[str, Any]:
    """Counters summed over the host parts, and the near tables' level (the
    lowest part's, plus the part bits: the level a one-tag table of as many
    buckets would have)."""
    pipe = redis.pipeline(transaction=False)
    for part in range(spread.parts):
        pipe.hgetall(spread.counters_key(part))
    for part in range(spread.parts):
        pipe.hget(spread.near_state(0, part), "L")
    replies = await pipe.execute()
    counts: dict[str, int] = defaultdict(int)
    for reply in replies[: spread.parts]:
        for name, value in reply.items():
            counts[name.decode() if isinstance(name, bytes) else name] += int(value)
    levels = [int(v) if v is not None else spread.near_min() for v in replies[spread.parts :]]
    return {
        "pages": counts["new"],
        "exact": counts["exact"],
        "near": counts["near"],
        "near_level": min(levels) + spread.part_bits,
    }
