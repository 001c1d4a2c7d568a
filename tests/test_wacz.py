"""``crawlproject wacz``'s mistakes, each one line on stderr and exit 1 (the
package itself: tests/test_archive_recrawl.py, checked by ``wacz validate``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from testkit.crawlproc import REPO_ROOT


def wacz(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "crawlproject", "--crawl", "nothing", "-s",
         f"CRAWL_DATA_DIR={data}", "wacz", *args],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_a_crawl_without_warc_files_is_one_line(tmp_path: Path) -> None:
    out = tmp_path / "x.wacz"
    done = wacz(tmp_path / "data", "--output", str(out))
    store = (tmp_path / "data" / "bodies").absolute().as_uri()
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"crawlproject wacz: crawl 'nothing' has no WARC files in {store}/nothing/warc/\n"
    )
    assert not out.exists() and not out.with_name("x.wacz.part").exists()


def test_an_output_not_named_wacz_is_one_line(tmp_path: Path) -> None:
    done = wacz(tmp_path / "data", "--output", str(tmp_path / "x.zip"))
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"crawlproject wacz: --output '{tmp_path / 'x.zip'}': name the package FILE.wacz\n"
    )
