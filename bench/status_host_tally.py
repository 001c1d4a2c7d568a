"""Per-page cost of the status page's host figures (crawlproject/status/hosts.py).

    .venv/bin/python bench/status_host_tally.py

Feeds ``HostTally`` the two downloader signals of N requests (real Scrapy
Request and Response objects, built beforehand and parsed once as the
downloader does for its slot key), spread over H hosts with one answer in 20
missing, and prints the time per request and the time of one report (the JSON
of the top 20 hosts written every CRAWL_STATUS_REPORT_SECONDS). Past
HOST_TALLY_MAX hosts the tally forgets the least busy half: the largest H shows
that cost, amortised.
"""

from __future__ import annotations

import time

from scrapy import Request
from scrapy.http import Response
from scrapy.utils.httpobj import urlparse_cached

from crawlproject.status.hosts import HOST_TALLY_MAX, HostTally

REQUESTS = 200_000


def run(hosts: int) -> None:
    pairs = []
    for i in range(REQUESTS):
        request = Request(f"http://h{i % hosts}.example/p/{i}")
        urlparse_cached(request)  # the downloader has done this before the signals
        answer = None if i % 20 == 0 else Response(request.url, status=200, request=request)
        pairs.append((request, answer))
    tally = HostTally()
    start = time.perf_counter()
    for request, answer in pairs:
        if answer is not None:
            tally.response_downloaded(answer, request, None)
        tally.request_left_downloader(request, None)
    per_request = (time.perf_counter() - start) / REQUESTS
    start = time.perf_counter()
    report = tally.report(time.time())
    report_ms = (time.perf_counter() - start) * 1000
    print(
        f"{hosts:>7,} hosts: {per_request * 1e9:6.0f} ns per request; "
        f"one report {report_ms:5.1f} ms ({len(report):,} bytes); "
        f"{len(tally.pages):,} hosts tallied (max {HOST_TALLY_MAX:,})"
    )


if __name__ == "__main__":
    for hosts in (10, 1_000, 10_000, 100_000):
        run(hosts)
