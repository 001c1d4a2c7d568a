"""An archive of a crawl and its recrawl (issue 44): revisit records, digests,
replay, and what a recrawl costs in WARC bytes.

A test web whose pages carry validators (most answer the recrawl's
conditional GET with 304, one changes), a mirror host (near copies of another
host's pages), three pages without validators, two of them serving
byte-identical bodies under two URLs; a real worker crawls it (the duplicate
filter on: it judges links and records, never what is archived),
``crawlproject recrawl --all`` makes every page due, a second worker recrawls
it. Then: every response and revisit has its request record; the revisit
counts of both profiles are what the site implies, each naming the stored
original; ``warcio check`` passes on every file and the index of each file is
``cdxj-indexer``'s; pywb replays every URL of both crawls with the body served
at that time; the recrawl's WARC bytes are at most a quarter of the first
crawl's.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import subprocess
import sys
import zipfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import format_datetime
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from crawlproject.body_digest import payload_digest
from crawlproject.store.revisits import IDENTICAL_PAYLOAD_DIGEST, SERVER_NOT_MODIFIED
from testkit.crawlproc import REPO_ROOT, start_worker, stats_of, wait_all
from testkit.redis_server import RedisServer
from testkit.s3_server import TEST_BUCKET, TEST_REGION, MotoServer
from testkit.testweb import TestWeb
from tests.test_pywb_replay import CDXJ_INDEXER, replay, wayback

CRAWL = "archive"
SETTINGS = {
    "CRAWL_HOST_DELAY": 0.02, "CRAWL_IDLE_CLOSE_SECONDS": 1.5, "CRAWL_IDLE_POLL_SECONDS": 0.2,
    "CRAWL_RECRAWL_TRACK": True,
}  # fmt: skip
# Pages of a typical size (the median HTML page is ~30 KB): what a revisit saves.
BODY_BYTES = 30_000
SAME = (
    "<html><head><title>Same</title></head><body><p>"
    + "served twice " * 2000
    + "</p></body></html>"
)
PLAIN = (
    "<html><head><title>Plain</title></head><body><p>"
    + "no validators " * 2000
    + "</p></body></html>"
)
SPECIAL = {
    1: {
        "/same-a.html": {"body": SAME, "content_type": "text/html"},
        "/same-b.html": {"body": SAME, "content_type": "text/html"},
        "/plain.html": {"body": PLAIN, "content_type": "text/html"},
    }
}
CHANGED = (1, 2)  # host, page: changed between the crawls
MIRROR = 3  # host 3 mirrors host 2: near copies


@dataclass
class Record:
    type: str
    url: str
    date: str
    headers: dict[str, str]
    concurrent_to: str | None
    record_id: str
    status: str | None


@dataclass
class Archive:
    web: TestWeb
    warc_dir: Path
    first: list[Path]  # the first crawl's WARC files
    second: list[Path]  # the recrawl's
    sent: list[dict[str, bytes]]  # per crawl: URL -> the body served (of every URL)
    stats: list[dict[str, int]]

    def crawled(self, crawl: int) -> set[str]:
        """The URLs crawl 0 or 1 fetched: all of them, then all but the copies
        (a duplicate is not tracked for recrawl: its original is)."""
        urls = set(self.sent[crawl])
        if crawl == 1:
            copies = self.stats[0].get("dedupe/exact", 0) + self.stats[0].get("dedupe/near", 0)
            assert len(answers(self.second)) == len(urls) - copies
            urls = set(answers(self.second))
        return urls


def answers(paths: list[Path]) -> dict[str, Record]:
    """URL -> its response or revisit record (each URL once per crawl)."""
    found: dict[str, Record] = {}
    for r in records(paths):
        if r.type in ("response", "revisit"):
            assert r.url not in found, r.url
            found[r.url] = r
    return found


def records(paths: list[Path]) -> list[Record]:
    out = []
    for path in paths:
        with open(path, "rb") as stream:
            for record in ArchiveIterator(stream):
                h = record.rec_headers
                out.append(
                    Record(
                        type=record.rec_type,
                        url=h.get_header("WARC-Target-URI") or "",
                        date=h.get_header("WARC-Date") or "",
                        headers=dict(h.headers),
                        concurrent_to=h.get_header("WARC-Concurrent-To"),
                        record_id=h.get_header("WARC-Record-ID") or "",
                        status=record.http_headers.get_statuscode()
                        if record.http_headers
                        else None,
                    )
                )
    return out


def crawl_once(
    redis: RedisServer, web: TestWeb, seeds: list[str], data: Path, log: Path
) -> dict[str, int]:
    proc = start_worker(
        REPO_ROOT, redis.url, CRAWL, seeds, {**SETTINGS, "CRAWL_DATA_DIR": str(data)}, log
    )
    wait_all([proc], timeout=120)
    return stats_of(proc.log_path)


def served(web: TestWeb) -> dict[str, bytes]:
    base = web.base_url(1)
    sent = {base + "same-a.html": SAME.encode(), base + "same-b.html": SAME.encode(),
            base + "plain.html": PLAIN.encode()}  # fmt: skip
    for h in range(1, web.hosts + 1):
        for k in range(web.page_count(h)):
            sent[web.base_url(h) + web.path_of(k).lstrip("/")] = web.render(h, k)
    return sent


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Archive]:
    tmp = tmp_path_factory.mktemp("archive")
    web = TestWeb(
        hosts=3, pages=6, latency_ms=0, links=2, cross_links=1, query_variants=0,
        body_bytes=BODY_BYTES, validators=True, special=SPECIAL,  # type: ignore[arg-type]
        mirrors={MIRROR: 2},
    ).start()  # fmt: skip
    try:
        base = web.base_url(1)
        seeds = [*web.seeds, base + "same-a.html", base + "same-b.html", base + "plain.html"]
        data = tmp / "data"
        warc_dir = data / "bodies" / CRAWL / "warc"
        with RedisServer() as redis:
            sent = [served(web)]
            stats = [crawl_once(redis, web, seeds, data, tmp / "c1.log")]
            first = sorted(warc_dir.glob("*.warc.gz"))
            web.change(*CHANGED)
            done = subprocess.run(
                [sys.executable, "-m", "crawlproject", "--redis-url", redis.url, "--crawl", CRAWL,
                 "recrawl", "--all"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            sent.append(served(web))
            stats.append(crawl_once(redis, web, seeds, data, tmp / "c2.log"))
            second = sorted(set(warc_dir.glob("*.warc.gz")) - set(first))
        yield Archive(web, warc_dir, first, second, sent, stats)
    finally:
        web.stop()


def test_every_response_and_revisit_has_its_request(archive: Archive) -> None:
    for crawl, files in enumerate((archive.first, archive.second)):
        recs = records(files)
        # Both digests on every record that has a payload (warcinfo: the block's);
        # warcio check (below) recomputes them.
        for r in recs:
            assert r.headers["WARC-Block-Digest"].startswith("sha1:"), r
            if r.type != "warcinfo":
                assert r.headers["WARC-Payload-Digest"].startswith("sha1:"), r
            if r.type == "response":
                assert r.headers["WARC-Payload-Digest"] == payload_digest(
                    archive.sent[crawl][r.url]
                )
        by_id = {r.record_id: r for r in recs if r.type in ("response", "revisit")}
        requests = [r for r in recs if r.type == "request"]
        assert sorted(r.concurrent_to or "" for r in requests) == sorted(by_id)
        for request in requests:
            assert request.url == by_id[request.concurrent_to or ""].url
        assert set(answers(files)) == archive.crawled(crawl)  # every URL, once
    # The first crawl archived every page, copies included: the filter judged
    # the mirror's near copies and the second identical body (their records
    # were dropped from the feed), and both are in the archive.
    assert archive.stats[0]["dedupe/near"] >= 1 and archive.stats[0]["dedupe/exact"] == 1


def test_revisits_of_both_profiles_name_the_stored_original(archive: Archive) -> None:
    base = archive.web.base_url(1)
    first, second = records(archive.first), records(archive.second)
    originals = {r.url: r for r in first if r.type == "response"}
    # First crawl: the byte-identical body is stored once, its second URL is a
    # revisit; the near copies are stored whole (other bytes).
    revisits1 = [r for r in first if r.type == "revisit"]
    assert len(revisits1) == 1
    mirror = {u for u in archive.sent[0] if u.startswith(archive.web.base_url(MIRROR))}
    source = {u for u in archive.sent[0] if u.startswith(archive.web.base_url(2))}
    assert mirror | source <= set(originals)
    [dup] = revisits1
    same = {base + "same-a.html", base + "same-b.html"}
    assert dup.url in same
    assert dup.headers["WARC-Profile"] == IDENTICAL_PAYLOAD_DIGEST
    original = originals[dup.headers["WARC-Refers-To-Target-URI"]]
    assert original.url in same - {dup.url}
    assert dup.headers["WARC-Refers-To-Date"] == original.date
    assert dup.headers["WARC-Payload-Digest"] == payload_digest(SAME.encode())
    assert dup.status == "200"  # its own status line and headers, for replay

    # Recrawl: 304s are server-not-modified revisits of the first crawl's record;
    # the pages without validators (200, same bytes) identical-payload revisits.
    changed = archive.web.base_url(CHANGED[0]) + archive.web.path_of(CHANGED[1]).lstrip("/")
    profiles = Counter(r.headers["WARC-Profile"] for r in second if r.type == "revisit")
    recrawled = archive.crawled(1)
    without = {base + "same-a.html", base + "same-b.html", base + "plain.html"} & recrawled
    with_validators = len(recrawled - without)
    assert len(without) == 2  # plain, and the one of the two identical bodies kept as original
    assert profiles == {SERVER_NOT_MODIFIED: with_validators - 1, IDENTICAL_PAYLOAD_DIGEST: 2}
    assert profiles[SERVER_NOT_MODIFIED] * 2 > len(recrawled)  # most pages answered 304
    assert [r.url for r in second if r.type == "response"] == [changed]
    for r in second:
        if r.type != "revisit":
            continue
        target = r.headers["WARC-Refers-To-Target-URI"]
        original = originals[target]
        assert r.headers["WARC-Refers-To-Date"] == original.date, r.url
        assert r.headers["WARC-Payload-Digest"] == payload_digest(archive.sent[0][target])
        if r.headers["WARC-Profile"] == SERVER_NOT_MODIFIED:
            assert target == r.url and r.status is None  # no HTTP head: the original's
        elif r.url in same:
            assert target == original.url and target in same
        else:
            assert (r.url, target, r.status) == (base + "plain.html", base + "plain.html", "200")
    assert archive.stats[1]["store/revisits/server_not_modified"] == with_validators - 1
    assert archive.stats[1]["store/revisits/identical_payload_digest"] == 2


def test_warcio_checks_every_file_and_the_indexes_are_cdxj_indexers(archive: Archive) -> None:
    for path in [*archive.first, *archive.second]:
        check = subprocess.run(
            [sys.executable, "-m", "warcio.cli", "check", "-v", str(path)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert check.returncode == 0, check.stdout
        records_in = len(records([path]))
        revisits = check.stdout.count("digest present but not checked (revisit)")
        assert check.stdout.count("digest pass") + revisits == records_in
        theirs = subprocess.run(
            [str(CDXJ_INDEXER), "--sort", str(path)], capture_output=True, text=True, check=True,
            timeout=60,
        ).stdout  # fmt: skip
        assert Path(f"{path}.cdxj").read_text(encoding="utf-8") == theirs


def test_pywb_replays_every_url_of_both_crawls(
    archive: Archive, tmp_path_factory: pytest.TempPathFactory
) -> None:
    root = tmp_path_factory.mktemp("pywb-archive")
    with wayback(archive.warc_dir, root, memento=True) as address:
        for crawl, files in enumerate((archive.first, archive.second)):
            sent = archive.sent[crawl]
            captures = {url: r.date for url, r in answers(files).items()}
            assert set(captures) == archive.crawled(crawl)
            for url, date in captures.items():
                timestamp = "".join(ch for ch in date if ch.isdigit())[:14]
                status, headers, body = replay(address, timestamp, url)
                assert (status, body) == (200, sent[url]), (url, timestamp)
                assert headers["content-type"].startswith("text/html"), (url, headers)
                # The capture of that time was served (a revisit: itself, with its
                # original's body), not the nearest other one.
                when = datetime.strptime(timestamp, "%Y%m%d%H%M%S").replace(tzinfo=UTC)
                assert headers["memento-datetime"] == format_datetime(when, usegmt=True), url


def test_the_recrawl_costs_at_most_a_quarter_of_the_first_crawls_bytes(archive: Archive) -> None:
    first = sum(p.stat().st_size for p in archive.first)
    second = sum(p.stat().st_size for p in archive.second)
    assert second * 4 <= first, (first, second)
    # And each file is gzip members end to end (what a reader seeks into).
    for path in archive.second:
        assert gzip.decompress(path.read_bytes()).startswith(b"WARC/1.1\r\n")


def test_index_lines_of_revisits(archive: Archive) -> None:
    lines = [
        json.loads(line.split(" ", 2)[2])
        for path in archive.second
        for line in Path(f"{path}.cdxj").read_text(encoding="utf-8").splitlines()
    ]
    revisits = sum(1 for f in lines if f.get("mime") == "warc/revisit")
    assert revisits == len(archive.crawled(1)) - 1


def test_wacz_packages_both_crawls_and_wacz_validate_passes(
    archive: Archive, tmp_path: Path
) -> None:
    data = archive.warc_dir.parents[2]
    out = tmp_path / "archive.wacz"
    done = subprocess.run(
        [sys.executable, "-m", "crawlproject", "--crawl", CRAWL, "-s", f"CRAWL_DATA_DIR={data}",
         "wacz", "--output", str(out)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    files = [*archive.first, *archive.second]
    pages = len(archive.sent[0])
    assert (done.returncode, done.stderr) == (0, "")
    size = out.stat().st_size
    assert (
        done.stdout
        == f"{out}: {len(files)} WARC file(s), {pages} pages, {size} bytes (crawl {CRAWL!r})\n"
    )
    check = subprocess.run(
        [str(Path(sys.executable).parent / "wacz"), "validate", "-f", str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr
    assert "Validation succeeded, the passed WACZ is valid" in check.stdout
    with zipfile.ZipFile(out) as zf:
        names = set(zf.namelist())
        assert names == {f"archive/{p.name}" for p in files} | {
            "indexes/index.cdx", "pages/pages.jsonl", "datapackage.json", "datapackage-digest.json"
        }  # fmt: skip
        for p in files:  # stored as they are, not deflated
            info = zf.getinfo(f"archive/{p.name}")
            assert info.compress_type == zipfile.ZIP_STORED and zf.read(info) == p.read_bytes()
        own = sorted(
            line for p in files for line in Path(f"{p}.cdxj").read_text("utf-8").splitlines()
        )
        assert zf.read("indexes/index.cdx").decode().splitlines() == own
        header, *lines = [json.loads(x) for x in zf.read("pages/pages.jsonl").decode().splitlines()]
        package = json.loads(zf.read("datapackage.json"))
    assert header == {"format": "json-pages-1.0", "id": "pages", "title": "All Pages"}
    assert {p["url"] for p in lines} == set(archive.sent[0])  # each page once: its latest capture
    base = archive.web.base_url(1)
    titles = {p["url"]: p.get("title") for p in lines}
    assert titles[base + "same-a.html"] == titles[base + "same-b.html"] == "Same"
    assert titles[base + "plain.html"] == "Plain"  # a revisit: its original's title
    assert all(titles.values())
    latest = {u: r.date for u, r in answers(archive.first).items()}
    latest |= {u: r.date for u, r in answers(archive.second).items()}
    for p in lines:
        assert p["ts"] == latest[p["url"]][:19] + "Z"
    assert package["wacz_version"] == "1.1.1" and package["title"] == CRAWL
    # datapackage.json: every file of the package but itself, its size and sha256.
    resources = {r["path"]: r for r in package["resources"]}
    assert set(resources) == names - {"datapackage.json", "datapackage-digest.json"}
    with zipfile.ZipFile(out) as zf:
        for name, resource in resources.items():
            data = zf.read(name)
            assert resource["bytes"] == len(data), name
            assert resource["hash"] == "sha256:" + hashlib.sha256(data).hexdigest(), name
        digest = json.loads(zf.read("datapackage-digest.json"))
        assert digest["hash"] == "sha256:" + hashlib.sha256(zf.read("datapackage.json")).hexdigest()


def test_crawlproject_body_of_a_revisited_url_prints_the_stored_original(archive: Archive) -> None:
    data = archive.warc_dir.parents[2]
    recrawled = archive.crawled(1)
    second = answers(archive.second)
    base = archive.web.base_url(1)
    not_modified = next(
        u for u, r in second.items() if r.headers.get("WARC-Profile") == SERVER_NOT_MODIFIED
    )
    for url in (not_modified, base + "plain.html"):
        assert url in recrawled and second[url].type == "revisit"
        done = subprocess.run(
            [sys.executable, "-m", "crawlproject", "--crawl", CRAWL, "-s",
             f"CRAWL_DATA_DIR={data}", "body", url],
            cwd=REPO_ROOT, capture_output=True, timeout=60,
        )  # fmt: skip
        assert (done.returncode, done.stdout) == (0, archive.sent[0][url])
        original = answers(archive.first)[url]
        stamp = "".join(ch for ch in original.date if ch.isdigit())[:14]
        want = f"{url}: unchanged since {stamp} (the body stored for {url} then)\n"
        assert done.stderr.decode() == want


def test_wacz_reads_the_crawl_from_s3(archive: Archive, moto: MotoServer, tmp_path: Path) -> None:
    client = moto.client()
    files = [*archive.first, *archive.second]
    for path in files:
        for item in (path, Path(f"{path}.cdxj")):
            client.upload_file(str(item), TEST_BUCKET, f"bodies/{CRAWL}/warc/{item.name}")
    out = tmp_path / "from-s3.wacz"
    settings = {
        "CRAWL_STORE_URI": f"s3://{TEST_BUCKET}/bodies", "AWS_ENDPOINT_URL": moto.endpoint_url,
        "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION_NAME": TEST_REGION,
    }  # fmt: skip
    cmd = [sys.executable, "-m", "crawlproject", "--crawl", CRAWL]
    for name, value in settings.items():
        cmd += ["-s", f"{name}={value}"]
    done = subprocess.run(
        [*cmd, "wacz", "--output", str(out)], cwd=REPO_ROOT, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert (done.returncode, done.stderr) == (0, "")
    check = subprocess.run(
        [str(Path(sys.executable).parent / "wacz"), "validate", "-f", str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr
    with zipfile.ZipFile(out) as zf:
        for p in files:
            assert zf.read(f"archive/{p.name}") == p.read_bytes()
        assert len(zf.read("pages/pages.jsonl").decode().splitlines()) == len(archive.sent[0]) + 1
