"""Page bodies stored as WARC through real crawls: local disk (the default) and S3
(a real moto_server over HTTP)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from crawlproject.store.index import url_key
from crawlproject.store.warc_read import read_payload
from testkit.crawlproc import REPO_ROOT, start_worker, stats_of, wait_all
from testkit.redis_server import RedisServer
from testkit.s3_server import TEST_BUCKET, TEST_REGION, MotoServer
from testkit.testweb import TestWeb

GZ_PAGE = "<html><body><p>" + "sent gzip-encoded " * 50 + "</p></body></html>"
FAST = {"CRAWL_HOST_DELAY": 0.05, "CRAWL_IDLE_CLOSE_SECONDS": 1.5, "CRAWL_IDLE_POLL_SECONDS": 0.2}
BUCKET = TEST_BUCKET


def crawl(
    redis: RedisServer, name: str, web: TestWeb, tmp_path: Path, extra_seeds: tuple[str, ...] = (),
    **settings: object,
) -> tuple[dict[str, int], list[dict[str, object]]]:  # fmt: skip
    out = tmp_path / f"{name}.jsonl"
    proc = start_worker(
        REPO_ROOT, redis.url, name, [*web.seeds, *extra_seeds], {**FAST, **settings},
        tmp_path / f"{name}.log", extra_args=["-O", str(out)],
    )  # fmt: skip
    wait_all([proc], timeout=120)
    items = [json.loads(line) for line in out.read_text().splitlines()]
    return stats_of(proc.log_path), items


def sent_bodies(web: TestWeb) -> dict[str, bytes]:
    """What the test web serves for each of its pages (the graph is fixed)."""
    bodies = {}
    for h in range(1, web.hosts + 1):
        for k in range(web.page_count(h)):
            bodies[web.base_url(h) + web.path_of(k).lstrip("/")] = web.render(h, k)
    return bodies


def test_pages_are_stored_as_warc_on_local_disk(
    redis_server: RedisServer, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    # A page above the inline-write size goes through the writer thread.
    big = ("<html><body>" + "large page " * 20_000 + "</body></html>").encode()
    web = testweb_factory(
        hosts=3, pages=6, latency_ms=0, links=2, cross_links=1, query_variants=0,
        special={1: {
            "/big.html": {"body": big.decode(), "content_type": "text/html"},
            # Sent gzip-encoded: stored decoded, with the encoding noted.
            "/gz.html": {"body": GZ_PAGE, "content_type": "text/html", "gzip": True,
                         "headers": {"Content-Encoding": "gzip"}},
        }},
    )  # fmt: skip
    data = tmp_path / "data"
    big_url = web.base_url(1) + "big.html"
    gz_url = web.base_url(1) + "gz.html"
    stats, items = crawl(
        redis_server, "warc", web, tmp_path, (big_url, gz_url), CRAWL_DATA_DIR=str(data),
        CRAWL_DEDUPE_ENABLED=False,
    )  # fmt: skip
    bodies = sent_bodies(web)
    assert {i["url"] for i in items} - {big_url, gz_url} == set(bodies) == web.expected_urls
    bodies[big_url] = big
    bodies[gz_url] = GZ_PAGE.encode()
    store_root = data / "bodies"
    for item in items:
        assert "crawl_response" not in item  # the pipeline took the Response out
        assert item["payload_digest"] and item["fetched_at"]
        stored = read_payload(
            store_root / str(item["warc_file"]), int(str(item["warc_offset"])),
            int(str(item["warc_length"])),
        )  # fmt: skip
        assert stored.url == item["url"] and stored.status == 200
        assert stored.body == bodies[str(item["url"])]  # byte-identical to what was sent
        encoding = [v for k, v in stored.headers if k.lower().endswith("content-encoding")]
        if item["url"] == gz_url:
            assert ("X-Crawler-Content-Encoding", "gzip") in stored.headers
            assert encoding == ["gzip"]  # and no Content-Encoding: the body is decoded
        else:
            assert encoding == []
    # Every file was finished and moved from the spool to the store.
    files = sorted((store_root / "warc" / "warc").glob("*.warc.gz"))
    assert files and not list((data / "spool").rglob("*.warc.gz*"))
    assert stats["store/pages"] == len(items) and stats["store/files_uploaded"] == len(files)
    assert stats["store/files_spooled_at_close"] == 0
    # warcio's own tools read the files: one response record per stored page.
    responses = 0
    for f in files:
        index = subprocess.run(
            [sys.executable, "-m", "warcio.cli", "index", "-f", "warc-type", str(f)],
            check=True, capture_output=True, text=True,
        ).stdout  # fmt: skip
        responses += sum('"response"' in line for line in index.splitlines())
    assert responses == len(items)

    # crawlproject body URL finds a page through the files' indexes.
    cli = [sys.executable, "-m", "crawlproject", "-s", f"CRAWL_DATA_DIR={data}", "--crawl", "warc"]
    url = sorted(bodies)[0]
    shown = subprocess.run([*cli, "body", url], cwd=REPO_ROOT, capture_output=True, check=True)
    assert shown.stdout == bodies[url]
    head = subprocess.run(
        [*cli, "body", "--headers", url], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert head[0] == "200 OK"
    assert any(h.lower().startswith("content-type: text/html") for h in head)
    missing = subprocess.run([*cli, "body", url + "nope"], cwd=REPO_ROOT, capture_output=True)
    assert missing.returncode == 1 and b"not stored" in missing.stderr
    # The indexes are keyed by SURT (as pywb looks pages up): a URL of the same
    # key (here the path's case) finds the page, and stderr says which URL it is.
    lines = [line for f in files for line in Path(f"{f}.cdxj").read_text().splitlines()]
    assert {line.split(" ", 1)[0] for line in lines} == {url_key(u) for u in bodies}
    big_upper = big_url.replace("big.html", "BIG.html")
    alias = subprocess.run([*cli, "body", big_upper], cwd=REPO_ROOT, capture_output=True)
    assert alias.returncode == 0 and alias.stdout == big
    assert f"stored as {big_url}".encode() in alias.stderr
    # An index of a crawl from before SURT keys (keyed by the URL) is still read.
    for f in files:
        legacy = Path(f"{f}.cdxj")
        legacy.write_text(
            "".join(f"{json.loads(x.split(' ', 2)[2])['url']} {x.split(' ', 1)[1]}\n"
                    for x in legacy.read_text().splitlines())
        )  # fmt: skip
    old = subprocess.run([*cli, "body", gz_url], cwd=REPO_ROOT, capture_output=True, check=True)
    assert old.stdout == GZ_PAGE.encode() and old.stderr == b""


def test_pages_are_stored_in_s3(
    redis_server: RedisServer,
    testweb_factory: Callable[..., TestWeb],
    tmp_path: Path,
    moto: MotoServer,
) -> None:
    web = testweb_factory(hosts=2, pages=5, latency_ms=0, links=2, cross_links=0, query_variants=0)
    stats, items = crawl(
        redis_server, "s3", web, tmp_path, CRAWL_DEDUPE_ENABLED=False,
        CRAWL_STORE_URI=f"s3://{BUCKET}/bodies", AWS_ENDPOINT_URL=moto.endpoint_url,
        AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_REGION_NAME=TEST_REGION,
    )  # fmt: skip
    bodies = sent_bodies(web)
    assert {i["url"] for i in items} == set(bodies)
    client = moto.client()
    local = tmp_path / "from-s3"
    local.mkdir()
    for item in items:
        key = f"bodies/{item['warc_file']}"
        path = local / Path(key).name
        if not path.exists():
            client.download_file(BUCKET, key, str(path))
        stored = read_payload(path, int(str(item["warc_offset"])), int(str(item["warc_length"])))
        assert stored.body == bodies[str(item["url"])]
    assert stats["store/files_uploaded"] >= 1
    assert stats["store/files_spooled_at_close"] == 0


def test_an_idle_worker_finishes_its_file_when_it_is_old_enough(
    redis_server: RedisServer, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    web = testweb_factory(hosts=1, pages=3, latency_ms=0, links=2, cross_links=0, query_variants=0)
    data = tmp_path / "data"
    proc = start_worker(
        REPO_ROOT, redis_server.url, "idle", web.seeds,
        {**FAST, "CRAWL_DATA_DIR": str(data), "CRAWL_STORE_ROTATE_SECONDS": 0.5,
         "CRAWL_IDLE_CLOSE_SECONDS": 5.0},
        tmp_path / "idle.log",
    )  # fmt: skip
    wait_all([proc], timeout=60)
    log = proc.log_path.read_text()
    # The pages come within the first 0.5 s, then the worker waits 5 s for more:
    # its file was finished and uploaded in that wait, not by its stop.
    closing = log.index("Closing spider")
    finished = [m.start() for m in re.finditer(r"WARC \S+ finished", log)]
    uploaded = [m.start() for m in re.finditer(r"\.warc\.gz uploaded to", log)]
    assert finished and uploaded and max(finished + uploaded) < closing
    indexes = (data / "bodies" / "idle" / "warc").glob("*.cdxj")
    assert sum(len(f.read_text().splitlines()) for f in indexes) == len(web.expected_urls)
