"""The duplicate index as ``crawlproject status`` shows it."""

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
    (``growing``: spread over ``parts``, the counters the parts' sums;
    ``none``: no page checked yet; ``one-tag``: an index of the layout removed
    in issue 42, which workers refuse until ``crawlproject dedupe migrate``;
    ``fixed``: the buckets of an index from before, never split), its near
    tables and their level."""
    cfg_raw = await redis.hgetall(keys.dedupe_config)
    cfg = {reply_text(k): reply_text(v) for k, v in cfg_raw.items()}
    figures: dict[str, Any] = {
        "pages": 0,
        "exact": 0,
        "near": 0,
        "layout": "none",
        "near_tables": 0,
        "near_level": None,
    }
    if "parts" in cfg:
        k, blocks, parts = int(cfg["k"]), int(cfg["b"]), int(cfg["parts"])
        layout = Spread(keys.crawl, k, blocks, parts, int(cfg["load"]), int(cfg["nmin"]))
        figures |= await spread_figures(redis, layout)
        figures |= {"layout": "growing", "near_tables": len(layout.tables), "parts": layout.parts}
    elif "k" in cfg:  # refused by workers: its layout only, its keys unread
        k = int(cfg["k"])
        figures["layout"] = "one-tag" if "b" in cfg else "fixed"
        figures["near_tables"] = len(near_tables(k, int(cfg.get("b", k + 1))))
    return figures


async def spread_figures(redis: Redis, spread: Spread) -> dict[str, Any]:
    """Counters summed over the host parts, and the near tables' level (the
    lowest part's, plus the part bits: the level of the whole table)."""
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
