"""Redirects archived as WARC records of their own when received, through a
real crawl: a page that 301s (with a gzip-encoded body), a two-hop chain (301,
302), a 301 to a 404 and a 301 to a page already crawled."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator

from testkit.crawlproc import REPO_ROOT, start_worker, stats_of, wait_all
from testkit.redis_server import RedisServer
from testkit.testweb import TestWeb, canonical_url, page_counts

FAST = {"CRAWL_HOST_DELAY": 0.05, "CRAWL_IDLE_CLOSE_SECONDS": 1.5, "CRAWL_IDLE_POLL_SECONDS": 0.2}
MOVED = "<html><body>Moved to <a href='/new'>/new</a></body></html>"


def page(text: str) -> dict[str, object]:
    return {"body": f"<html><body><p>{text}</p></body></html>", "content_type": "text/html"}


def test_redirects_are_archived_before_their_page_and_indexed(
    redis_server: RedisServer, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    # Redirect targets outside the page graph, but /known: a seed, so already
    # seen when /to-known redirects to it (the frontier drops that request).
    web = testweb_factory(
        hosts=1, pages=3, latency_ms=0, links=1, cross_links=0, query_variants=0,
        special={1: {
            "/old": {"status": 301, "body": MOVED, "content_type": "text/html", "gzip": True,
                     "headers": {"Location": "{base}/new", "Content-Encoding": "gzip"}},
            "/new": page("the new place"),
            "/chain/a": {"status": 301, "headers": {"Location": "/chain/b"}},
            "/chain/b": {"status": 302, "headers": {"Location": "{base}/final"}},
            "/final": page("end of the chain"),
            "/to-gone": {"status": 301, "headers": {"Location": "/missing"}},
            "/known": page("crawled from its own link"),
            "/to-known": {"status": 301, "headers": {"Location": "{base}/known"}},
        }},
    )  # fmt: skip
    base = web.base_url(1)
    old, new, a, b, final, to_gone, known, to_known = (
        base + p
        for p in ("old", "new", "chain/a", "chain/b", "final", "to-gone", "known", "to-known")
    )
    data = tmp_path / "data"
    out = tmp_path / "items.jsonl"
    proc = start_worker(
        REPO_ROOT, redis_server.url, "hops", [*web.seeds, known, old, a, to_gone, to_known],
        {**FAST, "CRAWL_DATA_DIR": str(data), "CRAWL_DEDUPE_ENABLED": False},
        tmp_path / "hops.log", extra_args=["-O", str(out)],
    )  # fmt: skip
    wait_all([proc], timeout=60)
    stats = stats_of(proc.log_path)
    items = {i["url"]: i for i in map(json.loads, out.read_text().splitlines())}

    # The fetch records: as requested, where the body came from, and the hops.
    assert items[old]["final_url"] == new
    assert items[old]["redirects"] == [{"url": old, "status": 301, "location": new}]
    assert items[a]["final_url"] == final
    assert items[a]["redirects"] == [
        {"url": a, "status": 301, "location": b},
        {"url": b, "status": 302, "location": final},
    ]
    # A redirect to a 404: a failed fetch, its hop listed; its 301 archived (below).
    assert items[to_gone]["status"] == 404 and items[to_gone]["error"] == "HttpError"
    assert items[to_gone]["redirects"] == [
        {"url": to_gone, "status": 301, "location": base + "missing"}
    ]
    assert all("redirects" not in i for u, i in items.items() if u not in (old, a, to_gone))
    # Each followed 3xx, whatever became of its target: old, a, b, to_gone, to_known.
    assert stats["store/redirects"] == 5
    # The already crawled target was fetched once (its seed), not again through the 301.
    fetched = page_counts(web.log)
    assert fetched[canonical_url(to_known)] == 1
    assert fetched[canonical_url(known)] == 1
    assert items[known]["status"] == 200

    # The WARC file: each hop's response record, before its target's (other
    # pages may come between: a hop is written when received).
    warc_dir = data / "bodies" / "hops" / "warc"
    responses = []
    for path in sorted(warc_dir.glob("*.warc.gz")):
        with open(path, "rb") as stream:
            for record in ArchiveIterator(stream):
                if record.rec_type == "response":
                    http = record.http_headers
                    responses.append((
                        record.rec_headers.get_header("WARC-Target-URI"),
                        int(http.get_statuscode()),
                        http.get_header("Location"),
                        record.content_stream().read(),
                    ))  # fmt: skip
    urls = [r[0] for r in responses]
    assert urls.index(old) < urls.index(new)
    assert urls.index(a) < urls.index(b) < urls.index(final)
    assert urls.count(known) == 1 and urls.count(to_known) == 1
    assert to_gone in urls and urls.count(base + "missing") == 1  # the 404 is kept too
    by_url = {r[0]: r for r in responses}
    assert by_url[old][1:3] == (301, base + "new")
    assert by_url[old][3] == MOVED.encode()  # sent gzip-encoded, stored decoded
    assert by_url[a][1:3] == (301, "/chain/b")  # the Location as sent
    assert by_url[b][1:3] == (302, final)
    assert by_url[final][1] == by_url[new][1] == by_url[known][1] == 200
    assert by_url[to_gone][1:3] == (301, "/missing")
    assert by_url[to_known][1:3] == (301, known)

    # The CDXJ indexes list the hops with their status and target.
    lines = [
        line for f in warc_dir.glob("*.cdxj") for line in f.read_text().splitlines()
    ]  # fmt: skip
    fields = [json.loads(line.split(" ", 2)[2]) for line in lines]
    indexed = {f["url"]: f for f in fields}
    assert (indexed[old]["status"], indexed[old]["redirect"]) == ("301", new)
    assert (indexed[a]["status"], indexed[a]["redirect"]) == ("301", "/chain/b")
    assert (indexed[b]["status"], indexed[b]["redirect"]) == ("302", final)
    assert indexed[final]["status"] == "200" and "redirect" not in indexed[final]
    assert (indexed[to_gone]["status"], indexed[to_gone]["redirect"]) == ("301", "/missing")
    assert (indexed[to_known]["status"], indexed[to_known]["redirect"]) == ("301", known)
    assert indexed[base + "missing"]["status"] == "404"

    # crawlproject body finds the 301 of the URL as linked.
    cli = [sys.executable, "-m", "crawlproject", "-s", f"CRAWL_DATA_DIR={data}", "--crawl", "hops"]
    head = subprocess.run(
        [*cli, "body", "--headers", old], cwd=REPO_ROOT, capture_output=True, text=True,
        check=True,
    ).stdout.splitlines()  # fmt: skip
    assert head[0] == "301 Moved Permanently"
    assert f"Location: {new}" in head
    assert "X-Crawler-Content-Encoding: gzip" in head
    shown = subprocess.run([*cli, "body", old], cwd=REPO_ROOT, capture_output=True, check=True)
    assert shown.stdout == MOVED.encode()
    assert f"301 redirect to {new}".encode() in shown.stderr
    for url, location in ((to_known, known), (to_gone, "/missing")):
        head = subprocess.run(
            [*cli, "body", "--headers", url], cwd=REPO_ROOT, capture_output=True, text=True,
            check=True,
        ).stdout.splitlines()  # fmt: skip
        assert head[0] == "301 Moved Permanently", url
        assert f"Location: {location}" in head, url
