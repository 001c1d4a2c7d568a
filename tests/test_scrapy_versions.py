"""The engine hooks (crawlproject/frontier/scrapy_glue/engine_hooks.py) against every Scrapy
the requirements allow, and against one that lacks a hook.

Each released Scrapy that requirements.txt's pin admits is downloaded once
(``pip download --no-deps``; its wheel unpacked under the venv, reused by later
runs) and a real ``scrapy crawl web`` worker runs with it first on the path, on
a real Redis and a loopback site: it must say that Scrapy's version, crawl
every page and end by itself (every lease ended through the hook). A copy of the
installed Scrapy whose engine slot has no ``remove_request`` must be refused
before the frontier connects: one line, exit status 1.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
import scrapy
from packaging.requirements import Requirement
from packaging.version import Version

from testkit.crawlproc import REPO_ROOT, start_worker, stats_of, wait_all
from testkit.testweb import TestWeb

CACHE = Path(sys.prefix) / "scrapy-versions"  # under .venv: reused run to run
FAST = {
    "CRAWL_HOST_DELAY": 0.05,
    "CRAWL_IDLE_CLOSE_SECONDS": 1.5,
    "CRAWL_IDLE_POLL_SECONDS": 0.2,
}
REFUSED = (
    "Not started: this Scrapy ({version}) lacks engine._slot.remove_request: "
    "crawlproject supports Scrapy 2.19.x (requirements.txt)"
)


def scrapy_pin() -> Requirement:
    for line in (REPO_ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and Requirement(line).name.lower() == "scrapy":
            return Requirement(line)
    raise AssertionError("requirements.txt has no scrapy line")


def released_versions() -> list[str]:
    """Every Scrapy on the package index; offline, the ones cached before."""
    try:
        out = subprocess.run(
            [sys.executable, "-m", "pip", "index", "versions", "scrapy"],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout
    except (subprocess.SubprocessError, OSError):
        return [p.name for p in CACHE.glob("*") if (p / "scrapy").is_dir()]
    found = re.search(r"Available versions: (.+)", out)
    assert found, f"pip index versions scrapy said: {out!r}"
    return [v.strip() for v in found.group(1).split(",")]


def allowed_versions() -> list[str]:
    pin = scrapy_pin()
    versions = {v for v in released_versions() if pin.specifier.contains(v)}
    versions.add(scrapy.__version__)  # installed from that pin: always checked
    assert all(pin.specifier.contains(v) for v in versions), (pin, versions)
    return sorted(versions, key=Version)


def unpacked(version: str) -> Path:
    """A directory holding Scrapy ``version`` (its wheel unpacked), cached."""
    target = CACHE / version
    if (target / "scrapy").is_dir():
        return target
    wheels = CACHE / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
         "-d", str(wheels), f"scrapy=={version}"],
        capture_output=True, timeout=300, check=True,
    )  # fmt: skip
    (wheel,) = wheels.glob(f"[Ss]crapy-{version}-*.whl")
    partial = CACHE / f"{version}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(partial)
    partial.rename(target)  # whole or not at all, for the next run
    return target


@pytest.mark.parametrize("version", allowed_versions())
def test_every_allowed_scrapy_fits_the_hooks_and_ends_every_lease(
    version: str,
    redis_url: str,
    testweb_factory: Callable[..., TestWeb],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = unpacked(version)
    monkeypatch.setenv("PYTHONPATH", str(path))  # start_worker puts it after the checkout
    web = testweb_factory(hosts=1, pages=4, links=1, cross_links=0)
    proc = start_worker(
        REPO_ROOT, redis_url, f"scrapy-{version}", [web.base_url(1)], FAST, tmp_path / "w.log"
    )  # fmt: skip
    wait_all([proc], timeout=120)
    log = proc.log_path.read_text()
    assert f"Scrapy {version} started" in log
    assert f"{path}/scrapy/" in subprocess.run(
        [sys.executable, "-c", "import scrapy; print(scrapy.__file__)"],
        cwd=REPO_ROOT, capture_output=True, text=True, check=True,
    ).stdout  # the worker's path: this Scrapy, not the installed one  # fmt: skip
    assert "Not started" not in log and "Stopping the worker" not in log
    stats = stats_of(proc.log_path)
    assert stats["response_received_count"] >= 4
    # The crawl ended by itself: every lease was ended, through the hook or an ack.
    assert "(finished)" in log


def test_a_scrapy_whose_engine_lacks_a_hook_is_refused_in_one_line(
    redis_url: str,
    testweb_factory: Callable[..., TestWeb],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    doctored = tmp_path / "scrapy-doctored"
    shutil.copytree(Path(scrapy.__file__).parent, doctored / "scrapy")
    engine = doctored / "scrapy" / "core" / "engine.py"
    source = engine.read_text()
    assert "def remove_request(" in source
    engine.write_text(source.replace("remove_request(", "forget_request("))
    monkeypatch.setenv("PYTHONPATH", str(doctored))
    web = testweb_factory(hosts=1, pages=2, links=1, cross_links=0)
    proc = start_worker(
        REPO_ROOT, redis_url, "doctored", [web.base_url(1)], FAST, tmp_path / "w.log"
    )
    assert wait_all([proc], timeout=90, check=False) == [1]
    log = proc.log_path.read_text()
    errors = [line for line in log.splitlines() if " ERROR: " in line]
    assert len(errors) == 1 and errors[0].endswith(REFUSED.format(version=scrapy.__version__)), log
    assert "Traceback" not in log
    assert "(frontier_unavailable)" in log
    assert not [r for r in web.log if not r.path.startswith("/robots.txt")]  # nothing fetched
