"""Every response that came back is stored (issue 34, item 8): real crawls of
pages that answer 200, 204, 404 (twice, the same body), 410, 500, 503 (after
its retries) and a 302 with no Location, on local disk and in S3 (a real
moto_server over HTTP); ``CRAWL_STORE_STATUSES`` narrows it; a value it
cannot mean refuses the start in one line."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from scrapy.settings import Settings
from warcio.archiveiterator import ArchiveIterator

from crawlproject.setting_values import ConfigError
from crawlproject.store.config import BodyStoreConfig
from crawlproject.store.statuses import parse_statuses
from crawlproject.store.warc_read import read_payload
from testkit.crawlproc import REPO_ROOT, start_worker, stats_of, wait_all
from testkit.redis_server import RedisServer
from testkit.s3_server import TEST_BUCKET, TEST_REGION, MotoServer
from testkit.testweb import TestWeb, canonical_url, page_counts

FAST = {"CRAWL_HOST_DELAY": 0.05, "CRAWL_IDLE_CLOSE_SECONDS": 1.5, "CRAWL_IDLE_POLL_SECONDS": 0.2}
CDXJ_INDEXER = Path(sys.executable).parent / "cdxj-indexer"
NOT_FOUND = "<html><body><h1>Not found</h1><p>No such page here.</p></body></html>"
RETRY_TIMES = 2  # Scrapy's default: a 5xx is fetched 1 + 2 times

# path -> (status, body, content type)
ANSWERS: dict[str, tuple[int, str, str]] = {
    "/missing-a": (404, NOT_FOUND, "text/html"),
    "/missing-b": (404, NOT_FOUND, "text/html"),  # the same error page: kept too
    "/gone": (410, "<html><body>Gone for good.</body></html>", "text/html"),
    "/boom": (500, "internal error\n", "text/plain"),
    "/busy": (503, "<html><body>Try later.</body></html>", "text/html"),
    # No body: stored whatever its type (CRAWL_STORE_CONTENT_TYPES leaves out bodies).
    "/empty": (204, "", "image/gif"),
    "/nowhere": (302, "<html><body>Moved, but where?</body></html>", "text/html"),
}


def special() -> dict[int, dict[str, dict[str, object]]]:
    return {
        1: {
            path: {"status": status, "body": body, "content_type": ctype}
            for path, (status, body, ctype) in ANSWERS.items()
        }
    }


def crawl(
    redis: RedisServer, name: str, web: TestWeb, tmp_path: Path, **settings: object
) -> tuple[dict[str, int], dict[str, dict[str, Any]], Path]:
    out = tmp_path / f"{name}.jsonl"
    extra = [web.base_url(1) + p.lstrip("/") for p in ANSWERS]
    proc = start_worker(
        REPO_ROOT, redis.url, name, [*web.seeds, *extra], {**FAST, **settings},
        tmp_path / f"{name}.log", extra_args=["-O", str(out)],
    )  # fmt: skip
    wait_all([proc], timeout=120)
    items = {i["url"]: i for i in map(json.loads, out.read_text().splitlines())}
    return stats_of(proc.log_path), items, proc.log_path


def response_records(files: list[Path]) -> Counter[tuple[str, int]]:
    """(URL, status) of every WARC response record in ``files``."""
    seen: Counter[tuple[str, int]] = Counter()
    for path in files:
        with open(path, "rb") as stream:
            for record in ArchiveIterator(stream):
                if record.rec_type == "response":
                    url = record.rec_headers.get_header("WARC-Target-URI")
                    seen[url, int(record.http_headers.get_statuscode())] += 1
    return seen


@pytest.mark.parametrize("backend", ["local", "s3"])
def test_every_response_is_stored_with_its_status_and_the_record_points_at_it(
    backend: str,
    redis_server: RedisServer,
    testweb_factory: Callable[..., TestWeb],
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    web = testweb_factory(
        hosts=1, pages=4, latency_ms=0, links=2, cross_links=0, query_variants=0,
        special=special(),
    )  # fmt: skip
    data = tmp_path / "data"
    settings: dict[str, object] = {"CRAWL_DATA_DIR": str(data), "RETRY_TIMES": RETRY_TIMES}
    if backend == "s3":
        moto: MotoServer = request.getfixturevalue("moto")
        settings.update(
            CRAWL_STORE_URI=f"s3://{TEST_BUCKET}/bodies", AWS_ENDPOINT_URL=moto.endpoint_url,
            AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
            AWS_REGION_NAME=TEST_REGION,
        )  # fmt: skip
    # The duplicate filter stays on: identical error pages must not cost a record.
    stats, items, _ = crawl(redis_server, "all", web, tmp_path, **settings)
    base = web.base_url(1)
    answers = {base + p.lstrip("/"): a for p, a in ANSWERS.items()}
    assert set(items) == web.expected_urls | set(answers)

    store = data / "bodies"
    if backend == "s3":
        client = moto.client()
        store = tmp_path / "from-s3"
        listed = client.list_objects_v2(Bucket=TEST_BUCKET, Prefix="bodies/all/warc/")
        for entry in listed["Contents"]:
            target = store / entry["Key"].removeprefix("bodies/")
            target.parent.mkdir(parents=True, exist_ok=True)
            client.download_file(TEST_BUCKET, entry["Key"], str(target))
    files = sorted((store / "all" / "warc").glob("*.warc.gz"))
    assert files

    # Each record says where its answer is, a 404's as a 200's.
    for url, item in items.items():
        status, body, _ = answers.get(url, (200, None, None))
        assert item["status"] == status, url
        stored = read_payload(
            store / str(item["warc_file"]), int(item["warc_offset"]), int(item["warc_length"])
        )
        assert (stored.url, stored.status) == (url, status)
        if body is not None:
            assert stored.body == body.encode(), url
    assert items[base + "busy"]["error"] == "HttpError"
    # One response record per URL with its real status line; the 503 after its
    # retries (the attempts in between are Scrapy's, not answers the crawl kept).
    records = response_records(files)
    assert records == Counter({(u, i["status"]): 1 for u, i in items.items()})
    fetched = page_counts(web.log)
    assert fetched[canonical_url(base + "busy")] == fetched[canonical_url(base + "boom")] == 3
    assert stats["store/pages"] == len(items)

    # The CDXJ index beside each file (pywb's) lists every one, with its status,
    # as webrecorder's cdxj-indexer does.
    lines = [line for f in files for line in Path(f"{f}.cdxj").read_text().splitlines()]
    indexed = {(f["url"], f["status"]) for f in (json.loads(x.split(" ", 2)[2]) for x in lines)}
    assert indexed == {(u, str(i["status"])) for u, i in items.items()}
    if CDXJ_INDEXER.exists():
        for f in files:
            theirs = subprocess.run(
                [str(CDXJ_INDEXER), "--sort", str(f)], capture_output=True, text=True,
                check=True, timeout=60,
            ).stdout.splitlines()  # fmt: skip
            ours = Path(f"{f}.cdxj").read_text().splitlines()
            assert [line.split(" ", 2)[:2] for line in ours] == [
                line.split(" ", 2)[:2] for line in theirs
            ]

    # crawlproject body shows a stored 404 like a page.
    cli = [sys.executable, "-m", "crawlproject", "-s", f"CRAWL_DATA_DIR={data}", "--crawl", "all"]
    if backend == "local":
        head = subprocess.run(
            [*cli, "body", "--headers", base + "missing-a"], cwd=REPO_ROOT, capture_output=True,
            text=True, check=True,
        ).stdout.splitlines()  # fmt: skip
        assert head[0] == "404 Not Found"


def test_crawl_store_statuses_narrows_what_is_stored(
    redis_server: RedisServer, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    web = testweb_factory(
        hosts=1, pages=4, latency_ms=0, links=2, cross_links=0, query_variants=0,
        special=special(),
    )  # fmt: skip
    data = tmp_path / "data"
    stats, items, _ = crawl(
        redis_server, "some", web, tmp_path, CRAWL_DATA_DIR=str(data),
        CRAWL_STORE_STATUSES="200-299,404", RETRY_TIMES=0,
    )  # fmt: skip
    kept = {u for u, i in items.items() if 200 <= i["status"] <= 299 or i["status"] == 404}
    assert {u for u, i in items.items() if "warc_file" in i} == kept
    assert len(kept) == len(web.expected_urls) + 3  # the pages, the 204, the two 404s
    files = sorted((data / "bodies" / "some" / "warc").glob("*.warc.gz"))
    assert set(response_records(files)) == {(u, items[u]["status"]) for u in kept}
    for status in (410, 500, 503, 302):
        assert stats[f"store/skipped_status/{status}"] == 1
    assert stats["store/pages"] == len(kept)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("200-299,40x", "'40x' is not a status code"),
        ("200-299,404-400", "'404-400' ends before it starts"),
        ("99", "outside the HTTP statuses"),
        (",", "is empty"),
        ("all,404", "'all' cannot be combined"),
    ],
)
def test_bad_statuses_are_refused(value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        BodyStoreConfig.from_settings(Settings({"CRAWL_STORE_STATUSES": value}))


def test_statuses_read_as_users_write_them() -> None:
    spec = parse_statuses("200-299, 404,5xx")
    assert [s for s in (199, 200, 250, 299, 300, 404, 410, 500, 599) if s in spec] == [
        200, 250, 299, 404, 500, 599,
    ]  # fmt: skip
    assert str(spec) == "200-299,404,500-599"
    assert parse_statuses(["2xx", 404]) == parse_statuses("200-299,404")
    assert all(s in parse_statuses(None) for s in (100, 204, 404, 599))
    assert all(s in parse_statuses("ALL") for s in (100, 599))
    assert True not in parse_statuses("1xx")  # a bool is no status


def test_a_bad_statuses_value_refuses_the_start_in_one_line(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    proc = start_worker(
        REPO_ROOT, redis_server.url, "bad", ["http://127.0.0.1:9/"],
        {"CRAWL_STORE_STATUSES": "2xx,oops"}, tmp_path / "bad.log",
    )  # fmt: skip
    assert wait_all([proc], timeout=60, check=False) == [1]
    log = proc.log_path.read_text()
    refused = [line for line in log.splitlines() if "Not started:" in line]
    assert len(refused) == 1 and "CRAWL_STORE_STATUSES" in refused[0]
    assert "'oops' is not a status code" in refused[0]
    assert "Traceback" not in log


SHORT_BODY = b"<html><body><p>cut short" + b" here" * 20


@contextmanager
def short_body_server(ip: str) -> Iterator[str]:
    """An HTTP server that promises 5,000 bytes of body, sends fewer, and
    closes the connection (robots.txt: an empty 404)."""
    listener = socket.create_server((ip, 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                request = conn.recv(65536)
                if b" /robots.txt " in request.split(b"\r\n", 1)[0]:
                    conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                    continue
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 5000\r\n"
                    b"Connection: close\r\n\r\n" + SHORT_BODY
                )

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://{ip}:{listener.getsockname()[1]}/"
    finally:
        stop.set()
        thread.join(5)
        listener.close()


def test_a_body_cut_short_is_stored_as_received_and_marked_truncated(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    out = tmp_path / "short.jsonl"
    with short_body_server("127.0.4.1") as url:
        proc = start_worker(
            REPO_ROOT, redis_server.url, "short", [url],
            {**FAST, "CRAWL_DATA_DIR": str(data), "DOWNLOAD_FAIL_ON_DATALOSS": False},
            tmp_path / "short.log", extra_args=["-O", str(out)],
        )  # fmt: skip
        wait_all([proc], timeout=120)
    [item] = [json.loads(line) for line in out.read_text().splitlines()]
    assert item["url"] == url and item["length"] == len(SHORT_BODY)
    path = data / "bodies" / str(item["warc_file"])
    with open(path, "rb") as stream:
        stream.seek(int(item["warc_offset"]))
        record = next(iter(ArchiveIterator(stream)))
        assert record.rec_type == "response"
        assert record.rec_headers.get_header("WARC-Truncated") == "disconnect"
        assert record.content_stream().read() == SHORT_BODY
