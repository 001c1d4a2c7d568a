"""The duplicate index as ``crawlproject status`` shows it (either layout)."""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis

from crawlproject.dedupe.layout import near_tables
from crawlproject.dedupe.spread import Spread
from crawlproject.dedupe.spread_index import spread_figures
from crawlproject.frontier.keys import CrawlKeys
from crawlproject.frontier.replies import reply_text


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
