"""Rolling WARC writer and crash recovery (crawlproject/store/warc.py), on local files.

The files are checked with warcio's own CLI (``python -m warcio.cli index|extract|check``),
run as a subprocess the way an operator would run it.
"""

from __future__ import annotations

import gzip
import json
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pytest

from crawlproject.store.rolling import OPEN_SUFFIX
from crawlproject.store.warc import RollingWarcWriter, WarcLocation, stored_response_headers
from crawlproject.store.warc_read import WarcReadError, read_payload
from crawlproject.store.warc_recovery import recover_open_files

REPO_ROOT = Path(__file__).resolve().parents[1]
FETCHED_AT = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)


@dataclass
class Exchange:
    url: str
    body: bytes
    response_headers: list[tuple[str, str]]
    status: int = 200
    reason: str = "OK"
    method: str = "GET"
    request_headers: list[tuple[str, str]] = field(
        default_factory=lambda: [("User-Agent", "crawlproject-test"), ("Accept", "*/*")]
    )
    request_body: bytes = b""

    def write(self, writer: RollingWarcWriter) -> WarcLocation:
        return writer.write_exchange(
            url=self.url,
            method=self.method,
            request_headers=self.request_headers,
            request_body=self.request_body,
            status=self.status,
            reason=self.reason,
            response_headers=self.response_headers,
            body=self.body,
            fetched_at=FETCHED_AT,
            ip_address="127.0.0.1",
        )


def sample_exchanges() -> list[Exchange]:
    rng = random.Random(6)
    html = b"<html><body>" + b"<p>caf\xc3\xa9 page</p>" * 500 + b"</body></html>"
    return [
        Exchange("http://a.test/", html, [("Content-Type", "text/html; charset=utf-8")]),
        Exchange(
            "http://a.test/bin?x=1&y=2",
            bytes(range(256)) * 40 + rng.randbytes(300_000),
            [("Content-Type", "application/octet-stream"), ("Content-Length", "310240")],
        ),
        Exchange("http://a.test/empty", b"", [("Content-Length", "0")], status=204, reason=""),
        # Scrapy decoded this gzip body: the stored record must not claim gzip.
        Exchange(
            "http://b.test/gz",
            b"decoded text " * 100,
            [
                ("Content-Type", "text/plain"),
                ("Content-Encoding", "gzip"),
                ("Content-Length", "57"),
                ("Vary", "Accept-Encoding"),
            ],
        ),
        Exchange(
            "http://b.test/chunked",
            b"chunk-decoded body\r\n\r\nwith blank lines",
            [("Transfer-Encoding", "chunked"), ("Content-Type", "text/plain")],
        ),
        # Header values Scrapy hands over as latin-1 decoded bytes.
        Exchange(
            "http://c.test/latin",
            b"ok",
            [("Content-Disposition", 'attachment; filename="caf\xe9.txt"'), ("X-Sign", "\xa9\xff")],
            status=404,
            reason="Not Found",
        ),
        Exchange(
            "http://c.test/post",
            b"posted",
            [("Content-Type", "text/plain")],
            method="POST",
            request_body=b"a=1&b=\x00\xff",
        ),
    ]


def warcio_cli(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "warcio.cli", *args], capture_output=True, check=True, timeout=60
    )


def warcio_index(path: Path) -> list[dict[str, str]]:
    fields = "offset,length,warc-type,warc-target-uri,warc-record-id,warc-concurrent-to"
    out = warcio_cli("index", "-f", fields, str(path)).stdout
    return [json.loads(line) for line in out.decode().splitlines()]


def write_all(directory: Path, exchanges: list[Exchange], **kwargs: object) -> list[WarcLocation]:
    writer = RollingWarcWriter(directory, "w1", **kwargs)  # type: ignore[arg-type]
    with writer:
        return [exchange.write(writer) for exchange in exchanges]


def test_index_extract_and_read_back_are_byte_identical(tmp_path: Path) -> None:
    exchanges = sample_exchanges()
    locations = write_all(tmp_path, exchanges)
    [path] = sorted(tmp_path.iterdir())
    assert path.name.endswith(".warc.gz")
    assert {loc.filename for loc in locations} == {path.name}

    index = warcio_index(path)
    assert index[0]["warc-type"] == "warcinfo"
    assert [entry["warc-type"] for entry in index[1:]] == ["response", "request"] * len(exchanges)
    responses, requests = index[1::2], index[2::2]
    for exchange, location, response, request in zip(
        exchanges, locations, responses, requests, strict=True
    ):
        assert (int(response["offset"]), int(response["length"])) == (
            location.offset,
            location.length,
        )
        assert response["warc-target-uri"] == request["warc-target-uri"] == exchange.url
        assert request["warc-concurrent-to"] == response["warc-record-id"]

        payload = warcio_cli("extract", "--payload", str(path), str(location.offset)).stdout
        assert payload == exchange.body

        stored = read_payload(path, location.offset, location.length)
        assert stored.body == exchange.body
        assert (stored.status, stored.reason, stored.url) == (
            exchange.status,
            exchange.reason,
            exchange.url,
        )
        assert stored.headers == stored_response_headers(
            exchange.response_headers, len(exchange.body)
        )
        assert stored.warc_date == "2024-05-06T07:08:09.123456Z"

    # warcio recomputes both digests (block, and payload after the HTTP head).
    check = subprocess.run(
        [sys.executable, "-m", "warcio.cli", "check", "-v", str(path)],
        capture_output=True,
        timeout=60,
    )
    assert check.returncode == 0, check.stdout
    assert check.stdout.count(b"digest pass") == 1 + 2 * len(exchanges)


def test_headers_stored_as_their_latin1_bytes_and_wire_headers_renamed(tmp_path: Path) -> None:
    exchanges = sample_exchanges()
    locations = write_all(tmp_path, exchanges)
    path = tmp_path / locations[0].filename
    raw = gzip.decompress(path.read_bytes())
    assert b'filename="caf\xe9.txt"\r\n' in raw
    assert b"X-Sign: \xa9\xff\r\n" in raw
    assert b"\r\nHTTP/1.1 204 \r\n" in raw  # empty reason keeps the status line's space

    gz = read_payload(path, locations[3].offset, locations[3].length)
    assert gz.headers == [
        ("Content-Type", "text/plain"),
        ("X-Crawler-Content-Encoding", "gzip"),
        ("X-Crawler-Content-Length", "57"),
        ("Vary", "Accept-Encoding"),
        ("Content-Length", str(len(exchanges[3].body))),
    ]
    chunked = read_payload(path, locations[4].offset, locations[4].length)
    assert ("X-Crawler-Transfer-Encoding", "chunked") in chunked.headers
    assert not any(name.lower() == "transfer-encoding" for name, _ in chunked.headers)
    binary = read_payload(path, locations[1].offset, locations[1].length)
    assert ("Content-Length", "310240") in binary.headers  # right already: left alone

    requests = [e for e in warcio_index(path) if e["warc-type"] == "request"]
    post = warcio_cli("extract", str(path), requests[-1]["offset"]).stdout
    assert b"POST /post HTTP/1.1\r\nHost: c.test\r\n" in post
    assert post.endswith(b"a=1&b=\x00\xff")


def test_read_payload_rejects_a_wrong_range_and_a_request(tmp_path: Path) -> None:
    [location] = write_all(tmp_path, sample_exchanges()[:1])
    path = tmp_path / location.filename
    with pytest.raises(WarcReadError):
        read_payload(path, location.offset + 1, location.length)
    request = warcio_index(path)[2]
    with pytest.raises(WarcReadError, match="request"):
        read_payload(path, int(request["offset"]), int(request["length"]))
    with pytest.raises(WarcReadError):
        read_payload(path, location.offset, 10**9)


def test_rotation_by_size(tmp_path: Path) -> None:
    rng = random.Random(1)
    exchanges = [
        Exchange(f"http://a.test/{i}", rng.randbytes(3000), [("Content-Type", "x/y")])
        for i in range(12)
    ]
    finished: list[Path] = []
    writer = RollingWarcWriter(
        tmp_path / "warc", "w7", max_file_bytes=8000, on_finished=finished.append
    )
    assert not (tmp_path / "warc").exists()  # no file I/O before the first page
    locations = [exchange.write(writer) for exchange in exchanges]
    assert writer.open_path is not None and writer.open_path.name.endswith(OPEN_SUFFIX)
    last = writer.close()
    assert writer.close() is None and writer.rotate() is None
    assert finished[-1] == last

    files = sorted((tmp_path / "warc").iterdir())
    assert files == finished  # reported once each, in name order
    assert len(files) >= 4
    assert not [p for p in files if p.name.endswith(OPEN_SUFFIX)]
    for path in files:
        assert path.name.startswith("w7-") and path.name.endswith(".warc.gz")
        index = warcio_index(path)
        assert index[0]["warc-type"] == "warcinfo"
        assert "warcinfo" not in [entry["warc-type"] for entry in index[1:]]
        # A file is finished at the first write that finds it at the limit.
        assert path.stat().st_size - int(index[-2]["offset"]) < 8000
    for exchange, location in zip(exchanges, locations, strict=True):
        stored = read_payload(
            tmp_path / "warc" / location.filename, location.offset, location.length
        )
        assert stored.body == exchange.body


def test_rotation_by_time_with_a_fake_clock(tmp_path: Path) -> None:
    now = [100.0]
    finished: list[Path] = []
    writer = RollingWarcWriter(
        tmp_path,
        "w2",
        max_file_seconds=60.0,
        clock=lambda: now[0],
        on_finished=finished.append,
        warcinfo={"operator": "tests", "isPartOf": "crawl-1"},
    )
    page = sample_exchanges()[0]
    first = page.write(writer)
    now[0] += 59.0
    assert writer.rotate_if_due() is None
    assert page.write(writer).filename == first.filename
    now[0] += 1.0
    second = page.write(writer)
    assert second.filename != first.filename
    assert finished == [tmp_path / first.filename]
    now[0] += 61.0
    assert writer.rotate_if_due() == tmp_path / second.filename  # an idle writer's timer
    assert writer.open_path is None
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([first.filename, second.filename])
    assert first.filename < second.filename

    with gzip.open(tmp_path / first.filename) as stream:
        info = stream.read(2000)
    assert b"WARC-Type: warcinfo" in info
    assert f"WARC-Filename: {first.filename}".encode() in info
    assert b"operator: tests\r\nisPartOf: crawl-1\r\n" in info
    assert b"software: crawlproject/" in info


def test_a_failing_on_finished_does_not_fail_the_write(tmp_path: Path) -> None:
    def boom(path: Path) -> None:
        raise RuntimeError("upload queue down")

    writer = RollingWarcWriter(tmp_path, "w3", max_file_bytes=1, on_finished=boom)
    page = sample_exchanges()[0]
    a, b = page.write(writer), page.write(writer)
    writer.close()
    assert a.filename != b.filename
    assert (tmp_path / a.filename).exists() and (tmp_path / b.filename).exists()


def test_a_write_that_raised_leaves_nothing_behind(tmp_path: Path) -> None:
    page = sample_exchanges()[0]
    writer = RollingWarcWriter(tmp_path, "w4")
    first = page.write(writer)
    page.request_body = None  # type: ignore[assignment]
    with pytest.raises(TypeError):
        page.write(writer)  # fails after the response record was serialized
    page.request_body = b""
    second = page.write(writer)
    path = writer.close()
    assert path is not None
    assert [int(e["offset"]) for e in warcio_index(path) if e["warc-type"] == "response"] == [
        first.offset,
        second.offset,
    ]
    assert read_payload(path, second.offset, second.length).body == page.body


def member_ends(path: Path) -> list[int]:
    return [int(e["offset"]) + int(e["length"]) for e in warcio_index(path)]


def test_recovery_keeps_every_complete_member_before_the_cut(tmp_path: Path) -> None:
    source_dir = tmp_path / "source"
    exchanges = sample_exchanges()
    locations = write_all(source_dir, exchanges)
    source = source_dir / locations[0].filename
    data = source.read_bytes()
    ends = member_ends(source)
    assert ends[-1] == len(data)

    cuts = {0, 5, len(data), len(data) - 1}
    for start, end in zip([0, *ends], ends, strict=False):
        cuts.update({end, end + 1, (start + end) // 2, start + 10})
    for cut in sorted(c for c in cuts if 0 <= c <= len(data)):
        work = tmp_path / f"cut{cut}"
        work.mkdir()
        name = "w1-20240101000000-00000.warc.gz"
        (work / (name + OPEN_SUFFIX)).write_bytes(data[:cut])

        recovered = recover_open_files(work)

        kept = [i for i, loc in enumerate(locations) if loc.offset + loc.length <= cut]
        assert not list(work.glob("*" + OPEN_SUFFIX))
        if not kept:  # nothing but (part of) the warcinfo: no page, no file
            assert recovered == [] and list(work.iterdir()) == [], cut
            continue
        assert recovered == [work / name]
        assert recovered[0].stat().st_size == max(e for e in ends if e <= cut)
        index = warcio_index(recovered[0])
        assert len(index) == sum(1 for e in ends if e <= cut)
        for i in kept:
            stored = read_payload(recovered[0], locations[i].offset, locations[i].length)
            assert stored.body == exchanges[i].body
        responses = [e for e in index if e["warc-type"] == "response"]
        assert len(responses) == len(kept)


def test_recovery_skips_a_live_writers_file_and_other_prefixes(tmp_path: Path) -> None:
    page = sample_exchanges()[0]
    live = RollingWarcWriter(tmp_path, "live")
    location = page.write(live)
    other = tmp_path / "other-20240101000000-00000.warc.gz.open"
    shutil.copyfile(live.open_path, other)  # type: ignore[arg-type]

    assert recover_open_files(tmp_path, prefix="nobody") == []
    assert recover_open_files(tmp_path) == [tmp_path / other.name.removesuffix(OPEN_SUFFIX)]
    assert live.open_path is not None and live.open_path.exists()  # still written: left alone

    page.write(live)
    finished = live.close()
    assert finished == tmp_path / location.filename
    assert len(warcio_index(finished)) == 5


def test_recovery_deletes_a_file_with_only_its_warcinfo(tmp_path: Path) -> None:
    [location] = write_all(tmp_path / "src", sample_exchanges()[:1])
    data = (tmp_path / "src" / location.filename).read_bytes()
    only_info = tmp_path / "w1-20240101000000-00001.warc.gz.open"
    only_info.write_bytes(data[: location.offset])
    empty = tmp_path / "w1-20240101000000-00002.warc.gz.open"
    empty.write_bytes(b"")
    assert recover_open_files(tmp_path) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]


CHILD = textwrap.dedent(
    """
    import json, random, sys
    from datetime import datetime, UTC
    from pathlib import Path
    from crawlproject.store.warc import RollingWarcWriter

    def body(i):
        return random.Random(i).randbytes((i * 7919) % 150_000)

    writer = RollingWarcWriter(Path(sys.argv[1]), "killed", max_file_bytes=1_000_000)
    i = 0
    while True:
        loc = writer.write_exchange(
            f"http://k.test/{i}", "GET", [], b"", 200, "OK",
            [("Content-Type", "application/octet-stream")], body(i),
            datetime.now(UTC), "127.0.0.1",
        )
        print(json.dumps([i, loc.filename, loc.offset, loc.length]), flush=True)
        i += 1
    """
)


def child_body(i: int) -> bytes:  # the child's body(i)
    return random.Random(i).randbytes((i * 7919) % 150_000)


def test_kill_9_mid_file_loses_no_page_it_reported_stored(tmp_path: Path) -> None:
    warc_dir = tmp_path / "warc"
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(warc_dir)],
        stdout=subprocess.PIPE,
        cwd=REPO_ROOT,
        env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"},
    )
    reported: list[list] = []
    deadline = time.monotonic() + 60
    try:
        assert proc.stdout is not None
        while len(reported) < 60 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            reported.append(json.loads(line))
        proc.send_signal(signal.SIGKILL)  # mid-write, or between two: either way no goodbye
        rest = proc.stdout.read()
    finally:
        proc.kill()
        proc.wait(timeout=10)
    # Lines written before the kill but not yet read count as reported too.
    reported += [json.loads(line) for line in rest.decode().splitlines() if line.endswith("]")]
    assert len(reported) >= 60, "child too slow or dead"
    assert len(list(warc_dir.glob("*" + OPEN_SUFFIX))) == 1

    recovered = recover_open_files(warc_dir)
    assert len(recovered) == 1
    assert not list(warc_dir.glob("*" + OPEN_SUFFIX))
    assert len({name for _, name, _, _ in reported}) >= 3  # it rotated on the way
    for i, name, offset, length in reported:
        stored = read_payload(warc_dir / name, offset, length)
        assert stored.body == child_body(i) and stored.url == f"http://k.test/{i}"
    last_file = warc_dir / reported[-1][1]
    assert warcio_index(last_file)[0]["warc-type"] == "warcinfo"
