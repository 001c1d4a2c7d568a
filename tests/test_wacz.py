"""``crawlproject wacz``'s mistakes, each one line on stderr and exit 1, no
traceback, no package or ``.part`` file left (the package itself:
tests/test_archive_recrawl.py, checked by ``wacz validate``)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import pytest

from crawlproject.store.warc import HttpExchange, RollingWarcWriter
from testkit.crawlproc import REPO_ROOT

REAL = "real"  # a crawl with one WARC file
BODY = b"<html><head><title>One</title></head><body>one page</body></html>"


def wacz(data: Path, *args: str, crawl: str = "nothing") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "crawlproject", "--crawl", crawl, "-s",
         f"CRAWL_DATA_DIR={data}", "wacz", *args],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """A data directory whose body store holds crawl REAL's one WARC file."""
    warc_dir = tmp_path / "data" / "bodies" / REAL / "warc"
    warc_dir.mkdir(parents=True)
    page = HttpExchange(
        url="http://a.test/", method="GET", request_headers=[], request_body=b"", status=200,
        reason="OK", response_headers=[("Content-Type", "text/html")], body=BODY,
        fetched_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
    )  # fmt: skip
    with RollingWarcWriter(warc_dir, "w") as writer:
        writer.write_exchanges([page])
    assert len(list(warc_dir.glob("*.warc.gz"))) == 1
    return tmp_path / "data"


def refused(done: subprocess.CompletedProcess[str], line: str) -> None:
    assert (done.returncode, done.stdout, done.stderr) == (1, "", f"crawlproject wacz: {line}\n")


def test_the_crawl_packages_when_nothing_is_wrong(data: Path, tmp_path: Path) -> None:
    # What the mistakes below are measured against: the same data and command work.
    out = tmp_path / "ok.wacz"
    done = wacz(data, "--output", str(out), crawl=REAL)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    with zipfile.ZipFile(out) as zf:
        assert b'"title": "One"' in zf.read("pages/pages.jsonl")


def test_a_crawl_without_warc_files_is_one_line(tmp_path: Path) -> None:
    out = tmp_path / "x.wacz"
    done = wacz(tmp_path / "data", "--output", str(out))
    store = (tmp_path / "data" / "bodies").absolute().as_uri()
    refused(done, f"crawl 'nothing' has no WARC files in {store}/nothing/warc/")
    assert not out.exists() and not out.with_name("x.wacz.part").exists()


def test_an_unknown_crawl_beside_a_known_one_is_one_line(data: Path, tmp_path: Path) -> None:
    out = tmp_path / "x.wacz"
    done = wacz(data, "--output", str(out))
    store = (data / "bodies").absolute().as_uri()
    refused(done, f"crawl 'nothing' has no WARC files in {store}/nothing/warc/")
    assert not out.exists()


def test_a_crawl_name_that_is_a_path_is_one_line(data: Path, tmp_path: Path) -> None:
    # "real/../real" would read crawl REAL's files under another name.
    done = wacz(data, "--output", str(tmp_path / "x.wacz"), crawl=f"{REAL}/../{REAL}")
    name = f"{REAL}/../{REAL}"
    refused(done, f"crawl name {name!r} must be 1-64 characters of letters, digits, _ . -")
    assert not (tmp_path / "x.wacz").exists()


def test_an_output_not_named_wacz_is_one_line(tmp_path: Path) -> None:
    done = wacz(tmp_path / "data", "--output", str(tmp_path / "x.zip"))
    refused(done, f"--output '{tmp_path / 'x.zip'}': name the package FILE.wacz")


@pytest.mark.parametrize(
    ("where", "why"),
    [
        ("missing/x.wacz", "No such file or directory"),
        ("a-file/x.wacz", "Not a directory"),
        ("a-dir.wacz", "it is a directory"),
    ],
)
def test_an_output_that_cannot_be_written_is_one_line(
    data: Path, tmp_path: Path, where: str, why: str
) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    (tmp_path / "a-dir.wacz").mkdir()
    out = tmp_path / where
    done = wacz(data, "--output", str(out), crawl=REAL)
    refused(done, f"cannot write {out}: {why}")
    assert not out.with_name(out.name + ".part").exists()


def test_a_wrong_store_uri_is_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "crawlproject", "--crawl", REAL, "-s",
         "CRAWL_STORE_URI=ftp://x/y", "wacz", "--output", str(tmp_path / "x.wacz")],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    refused(
        done,
        "CRAWL_STORE_URI 'ftp://x/y': unknown scheme 'ftp'; "
        "expected file:///dir, s3://bucket/prefix or a plain path",
    )
