"""CPU cost of storing one page as WARC, outside a crawl.

    .venv/bin/python bench/warc_write.py [--pages 3000]

Pages of the CPU-bound crawl benchmark's test web (body_bytes 2048, seed 2, ~2.6 KB)
go through RollingWarcWriter.write_exchange: inline on one thread; then through a
one-thread executor while the calling thread keeps busy with Python work (as the
storage pipeline does from Scrapy's reactor thread: the extra CPU over the busy
work alone is the write plus the hand-off); then the CDXJ index of the file
(crawlproject/store/index.py, built by the uploader when a file is finished).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from crawlproject.store.index import build_index
from crawlproject.store.warc import RollingWarcWriter
from testkit.testweb import TestWeb

RESPONSE_HEADERS = [
    ("Content-Type", "text/html; charset=utf-8"),
    ("Date", "Sun, 22 Nov 2026 17:00:00 GMT"),
    ("Server", "testweb"),
]
REQUEST_HEADERS = [("Accept", "text/html"), ("User-Agent", "crawlproject/0.1")]
BUSY_LOOP = 3000  # iterations of Python work between two submitted writes


def busy(n: int) -> int:
    x = 0
    for i in range(n):
        x += i * i
    return x


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--pages", type=int, default=3000)
    n = p.parse_args().pages
    web = TestWeb(hosts=1, pages=40, latency_ms=0, body_bytes=2048, seed=2)
    bodies = [web.render(1, k) for k in range(40)]
    writer = RollingWarcWriter(Path(tempfile.mkdtemp()), "bench")

    def write(i: int) -> None:
        body = bodies[i % len(bodies)]
        headers = [*RESPONSE_HEADERS, ("Content-Length", str(len(body)))]
        writer.write_exchange(
            f"http://127.0.3.1:8080/p/{i}", "GET", REQUEST_HEADERS, b"", 200, "OK",
            headers, body, datetime.now(UTC), "127.0.3.1",
        )  # fmt: skip

    t = time.process_time()
    for i in range(n):
        write(i)
    inline = (time.process_time() - t) / n
    with ThreadPoolExecutor(max_workers=1) as executor:
        t = time.process_time()
        futures = []
        for i in range(n):
            futures.append(executor.submit(write, n + i))
            busy(BUSY_LOOP)
        for f in futures:
            f.result()
        both = time.process_time() - t
    t = time.process_time()
    for _ in range(n):
        busy(BUSY_LOOP)
    alone = time.process_time() - t
    path = writer.close()
    assert path is not None
    t = time.process_time()
    build_index(path)
    index = (time.process_time() - t) / (2 * n)
    size = sum(len(bodies[i % len(bodies)]) for i in range(n)) / n
    print(f"pages of {size:.0f} B; CPU per page:")
    print(f"  write_exchange inline                 {inline * 1e3:.3f} ms")
    print(f"  write_exchange via executor (extra)   {(both - alone) / n * 1e3:.3f} ms")
    print(f"  CDXJ index of the finished file       {index * 1e3:.3f} ms")


if __name__ == "__main__":
    main()
