"""The worker's /metrics server: labels at scrape time, and its linger at the end."""

from __future__ import annotations

import asyncio
import urllib.request

from crawlproject.status.metrics import MetricsServer, StatsExporter
from testkit.processes import free_port


def get(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        return answer.read().decode()


def test_scrapes_read_the_stats_of_the_moment_and_linger_waits_for_one_more() -> None:
    stats = {"store/pages": 1}
    port = free_port()
    server = MetricsServer(
        "127.0.0.1", port, StatsExporter(lambda: stats, lambda: ("c", "w"), lambda: {})
    )
    try:
        before = get(port)  # begun before the linger: does not end it
        assert 'crawlproject_store_pages_total{crawl="c",worker="w"} 1.0' in before
        stats["store/pages"] = 5

        async def linger_then_scrape() -> tuple[bool, str]:
            waiting = asyncio.create_task(server.linger(60, server.next_scrape()))
            await asyncio.sleep(0.2)
            assert not waiting.done()
            text = await asyncio.to_thread(get, port)
            return await waiting, text

        ended, after = asyncio.run(linger_then_scrape())
        assert ended
        assert 'crawlproject_store_pages_total{crawl="c",worker="w"} 5.0' in after
        # No scrape at all: it gives up after its time.
        assert asyncio.run(server.linger(0.2, server.next_scrape())) is False
        # A scrape begun between the count taken and the linger started (the
        # linger's line read, a scrape at once) ends it: it came after the line.
        first = server.next_scrape()
        assert 'crawlproject_store_pages_total{crawl="c",worker="w"} 5.0' in get(port)
        assert asyncio.run(server.linger(5, first)) is True
    finally:
        server.close()
