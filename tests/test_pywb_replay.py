"""pywb replays a real crawl from the project's own WARC files and CDXJ
indexes, as they are (no re-indexing), and ``cdxj-indexer`` writes the same
index for each of those files.

pywb (2.10) pins ``redis<3``, which the project's Redis client cannot live
beside, so it is installed in a venv of its own, ``.venv/pywb``
(requirements-pywb.txt, by ``./run tests`` or ``./run pywb``); this module
runs ``./run pywb`` itself when it is missing and skips only if that fails.
Its ``wayback`` server runs on a free loopback port with one collection whose
``index_paths`` is the directory of the project's ``.cdxj`` files and
``archive_paths`` that of its WARC files; each page is fetched through the
identity replay URL (``/<coll>/<timestamp>id_/<url>``) and compared with what
the test web served.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from testkit.crawlproc import REPO_ROOT, start_worker, stats_of, wait_all
from testkit.redis_server import RedisServer
from testkit.testweb import TestWeb

PYWB_VENV = REPO_ROOT / ".venv" / "pywb"
WAYBACK = PYWB_VENV / "bin" / "wayback"
CDXJ_INDEXER = Path(sys.executable).parent / "cdxj-indexer"
COLLECTION = "crawl"
FAST = {"CRAWL_HOST_DELAY": 0.05, "CRAWL_IDLE_CLOSE_SECONDS": 1.5, "CRAWL_IDLE_POLL_SECONDS": 0.2}
MOVED = b"<html><body>Moved to <a href='/new'>/new</a></body></html>"
NEW = b"<html><body><p>the new place</p></body></html>"
GZ_PAGE = b"<html><body><p>" + b"sent gzip-encoded " * 50 + b"</p></body></html>"


@dataclass
class Crawled:
    web: TestWeb
    warc_dir: Path
    sent: dict[str, bytes]  # what the test web served per URL (decoded)
    redirects: dict[str, tuple[int, str]]  # URL -> (status, absolute Location)


@pytest.fixture(scope="module")
def crawled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Crawled]:
    tmp = tmp_path_factory.mktemp("pywb-crawl")
    web = TestWeb(
        hosts=2, pages=5, latency_ms=0, links=2, cross_links=1, query_variants=0,
        special={1: {
            "/old": {"status": 301, "body": MOVED.decode(), "content_type": "text/html",
                     "headers": {"Location": "{base}/new"}},
            "/new": {"body": NEW.decode(), "content_type": "text/html"},
            "/gz.html": {"body": GZ_PAGE.decode(), "content_type": "text/html", "gzip": True,
                         "headers": {"Content-Encoding": "gzip"}},
        }},
    ).start()  # fmt: skip
    try:
        base = web.base_url(1)
        extra = [base + "old", base + "gz.html"]
        data = tmp / "data"
        with RedisServer() as redis:
            proc = start_worker(
                REPO_ROOT, redis.url, "replay", [*web.seeds, *extra],
                {**FAST, "CRAWL_DATA_DIR": str(data), "CRAWL_DEDUPE_ENABLED": False},
                tmp / "replay.log",
            )  # fmt: skip
            wait_all([proc], timeout=60)
        assert stats_of(proc.log_path)["store/redirects"] == 1
        sent = {}
        for h in range(1, web.hosts + 1):
            for k in range(web.page_count(h)):
                sent[web.base_url(h) + web.path_of(k).lstrip("/")] = web.render(h, k)
        sent |= {base + "old": MOVED, base + "new": NEW, base + "gz.html": GZ_PAGE}
        yield Crawled(
            web, data / "bodies" / "replay" / "warc", sent, {base + "old": (301, base + "new")}
        )
    finally:
        web.stop()


def index_entries(warc_dir: Path) -> list[tuple[str, str, dict[str, str]]]:
    """(key, timestamp, fields) of every line of the project's index files."""
    entries = []
    for path in sorted(warc_dir.glob("*.warc.gz.cdxj")):
        for line in path.read_text(encoding="utf-8").splitlines():
            key, timestamp, raw = line.split(" ", 2)
            entries.append((key, timestamp, json.loads(raw)))
    return entries


def test_the_index_of_each_warc_file_is_cdxj_indexers(crawled: Crawled) -> None:
    warcs = sorted(crawled.warc_dir.glob("*.warc.gz"))
    assert warcs
    for warc in warcs:
        ours = Path(f"{warc}.cdxj").read_text(encoding="utf-8").splitlines()
        theirs = subprocess.run(
            [str(CDXJ_INDEXER), "--sort", str(warc)], capture_output=True, text=True, check=True,
            timeout=60,
        ).stdout.splitlines()  # fmt: skip
        # Line for line, but for the project's one added field: a redirect's
        # Location (as Common Crawl's CDXJ has it), which cdxj-indexer does not write.
        stripped = []
        for line in ours:
            key, timestamp, raw = line.split(" ", 2)
            fields = json.loads(raw)
            if fields.pop("redirect", None) is not None:
                assert crawled.redirects[fields["url"]][1] == json.loads(raw)["redirect"]
            stripped.append(f"{key} {timestamp} {json.dumps(fields)}")
        assert stripped == theirs
    urls = {fields["url"] for _, _, fields in index_entries(crawled.warc_dir)}
    assert urls == set(crawled.sent)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ensure_pywb() -> None:
    if WAYBACK.exists():
        return
    done = subprocess.run(
        ["./run", "pywb"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=600
    )
    if done.returncode != 0 or not WAYBACK.exists():
        pytest.skip(f"pywb could not be installed in {PYWB_VENV}: {done.stderr[-500:]}")


@contextlib.contextmanager
def wayback(warc_dir: Path, root: Path, memento: bool = False) -> Iterator[str]:
    """A running pywb (its address) whose collection is the project's own
    index and WARC files in ``warc_dir``; ``memento``: each replay says which
    capture it served (its ``Memento-Datetime`` header)."""
    ensure_pywb()
    # JSON is YAML: the paths need no quoting rules of their own.
    config: dict[str, object] = {
        "collections": {
            COLLECTION: {"index_paths": f"{warc_dir}/", "archive_paths": f"{warc_dir}/"}
        }
    }
    if memento:
        config["enable_memento"] = True
    (root / "config.yaml").write_text(json.dumps(config))
    port = free_port()
    log = open(root / "wayback.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [str(WAYBACK), "--port", str(port), "--bind", "127.0.0.1"],
        cwd=root, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(
                        "pywb did not start: " + (root / "wayback.log").read_text()[-2000:]
                    ) from None
                time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()


@pytest.fixture(scope="module")
def pywb(crawled: Crawled, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A running pywb whose collection is the project's own index and WARC files."""
    with wayback(crawled.warc_dir, tmp_path_factory.mktemp("pywb")) as address:
        yield address


def replay(address: str, timestamp: str, url: str) -> tuple[int, dict[str, str], bytes]:
    """GET the identity replay of ``url`` at ``timestamp``; redirects not followed."""
    conn = http.client.HTTPConnection(address, timeout=30)
    try:
        conn.request("GET", f"/{COLLECTION}/{timestamp}id_/{url}")
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def test_pywb_replays_every_stored_page_byte_for_byte(crawled: Crawled, pywb: str) -> None:
    entries = index_entries(crawled.warc_dir)
    assert len(entries) == len(crawled.sent)  # every page, the redirect and its target
    for _, timestamp, fields in entries:
        url = fields["url"]
        status, headers, body = replay(pywb, timestamp, url)
        assert body == crawled.sent[url], url
        if url in crawled.redirects:
            want_status, target = crawled.redirects[url]
            # Identity replay: the Location as the server sent it.
            assert (status, headers["location"]) == (want_status, target)
        else:
            assert status == 200, url
            assert headers["content-type"].startswith("text/html"), (url, headers)
    # The gzip-encoded page is replayed decoded, as stored (the wire's gzip
    # is named X-Crawler-Content-Encoding, so pywb does not claim it).
    gz_url = crawled.web.base_url(1) + "gz.html"
    [gz_ts] = [ts for _, ts, f in entries if f["url"] == gz_url]
    _, headers, body = replay(pywb, gz_ts, gz_url)
    assert "content-encoding" not in headers and body == GZ_PAGE
