"""Per-page cost of the storage pipeline (pipelines/store.py) on the reactor's thread.

Feeds ``BodyStorePipeline.process_item`` N kept pages (a 2.6 KB HTML body, the
size bench/warc_write.py uses; all small enough to be written inline) in each
format, into a spool and a local body store under a temporary directory, and
reports the mean wall time per page (the pipeline alone: no crawl, no Redis).
Each format's run is repeated; the figure is the median run.

    .venv/bin/python bench/store_pipeline.py                 # 5,000 pages x 5 runs
    .venv/bin/python bench/store_pipeline.py --pages 2000 --runs 3

To compare with another version of the code, run this file with that
checkout first on the path (its own pipeline is used, this script is the same):

    PYTHONPATH=/path/to/other/checkout .venv/bin/python bench/store_pipeline.py
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from scrapy.http import HtmlResponse, Request
from scrapy.signalmanager import SignalManager
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler

BODY = (b"<html><head><title>t</title></head><body>" + b"<p>some text here</p>" * 120)[:2600]


def pages(count: int) -> list[dict[str, Any]]:
    from crawlproject.store.config import RESPONSE_ITEM_KEY

    now = datetime.now(UTC).isoformat()
    items = []
    for n in range(count):
        url = f"http://127.0.0.1:8000/page/{n}"
        # A distinct body per page: the object format writes each once.
        body = BODY + str(n).encode()
        response = HtmlResponse(
            url,
            body=body,
            headers={"Content-Type": "text/html; charset=utf-8", "Server": "bench"},
            request=Request(url, headers={"User-Agent": "bench"}),
        )
        items.append({"url": url, "fetched_at": now, RESPONSE_ITEM_KEY: response})
    return items


async def one_run(store_format: str, count: int) -> float:
    from pipelines.store import BodyStorePipeline

    with tempfile.TemporaryDirectory() as tmp:
        crawler = get_crawler(
            settings_dict={
                "CRAWL_NAME": "bench",
                "CRAWL_DATA_DIR": str(Path(tmp, "data")),
                "CRAWL_STORE_FORMAT": store_format,
                "CRAWL_STORE_URI": Path(tmp, "store").as_uri(),
            }
        )
        # The pipeline alone: no engine (the worker id is then "local"), no spider.
        stand_in: Any = SimpleNamespace(
            settings=crawler.settings,
            signals=SignalManager(),
            stats=MemoryStatsCollector(crawler),
            spider=None,
            engine=None,
        )
        pipeline = BodyStorePipeline.from_crawler(stand_in)
        await pipeline.open_spider()
        items = pages(count)
        started = time.perf_counter()
        for item in items:
            await pipeline.process_item(item)
        elapsed = time.perf_counter() - started
        await pipeline.close_spider()
        return elapsed / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--pages", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    import pipelines.store

    print(f"pipeline: {pipelines.store.__file__}")
    for store_format in ("warc", "object"):
        runs = [asyncio.run(one_run(store_format, args.pages)) for _ in range(args.runs)]
        print(
            f"{store_format:6}  median {statistics.median(runs) * 1e6:7.1f} us/page  "
            f"(runs: {', '.join(f'{r * 1e6:.1f}' for r in runs)}; {args.pages} pages each)"
        )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
