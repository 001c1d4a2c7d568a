"""Deploying to real Scrapyd servers (loopback) with ``python -m crawlproject.deploy``.

Scrapyd runs the spider from the uploaded egg, on an interpreter that cannot
import the checkout (testkit/scrapyd_server.py), so these tests judge the
egg as a Scrapyd host would see it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from testkit.crawlproc import LOOPBACK_ALLOW, REPO_ROOT, stats_of
from testkit.redis_server import RedisServer
from testkit.scrapyd_server import ScrapydServer, clean_env, isolated_python
from testkit.testweb import TestWeb, page_counts, politeness_report

PROJECT = "crawlproject"
DELAY = 0.2
# What a copy of the project needs to build its egg.
PROJECT_FILES = (
    "crawlproject", "spiders", "middlewares", "pipelines",
    "scrapy.cfg", "setup.py", "pyproject.toml", "requirements.txt",
)  # fmt: skip


@pytest.fixture
def scrapyd_factory(tmp_path: Path) -> Iterator[Callable[[], ScrapydServer]]:
    servers: list[ScrapydServer] = []

    def make() -> ScrapydServer:
        servers.append(ScrapydServer(tmp_path / f"scrapyd-{len(servers)}").start())
        return servers[-1]

    yield make
    for server in servers:
        server.stop()


def run_deploy(
    cwd: Path, *args: str, command: Sequence[str] | None = None
) -> subprocess.CompletedProcess[str]:
    cmd = list(command or [sys.executable, "-m", "crawlproject.deploy"]) + list(args)
    return subprocess.run(
        cmd, cwd=cwd, env=clean_env(), capture_output=True, text=True, timeout=120, check=False
    )


def test_egg_is_complete_and_imports_from_the_zip(tmp_path: Path) -> None:
    egg = tmp_path / "out.egg"
    done = run_deploy(REPO_ROOT, "--build-egg", str(egg))
    assert done.returncode == 0, done.stderr
    names = set(zipfile.ZipFile(egg).namelist())
    lua = {p.relative_to(REPO_ROOT).as_posix() for p in REPO_ROOT.glob("crawlproject/**/lua/*.lua")}
    assert lua and lua <= names
    for package in ("crawlproject", "crawlproject/frontier", "spiders", "middlewares", "pipelines"):
        assert f"{package}/__init__.py" in names
    # The Lua scripts load through importlib.resources from inside the zip.
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "from crawlproject.frontier.store.scripts import load_lua;"
        "from crawlproject.lua import read_lua;"
        "import spiders.web, crawlproject.frontier as f;"
        "assert f.__file__.startswith(sys.argv[1]), f.__file__;"
        "print(len(load_lua('claim')), len(read_lua('crawlproject.dedupe', 'spread_exact')))"
    )
    python = isolated_python(tmp_path / "python")
    check = subprocess.run(
        [str(python), "-c", code, str(egg)], cwd=tmp_path, env=clean_env(),
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert check.returncode == 0, check.stderr
    assert all(int(n) > 100 for n in check.stdout.split())


def test_two_scrapyd_machines_crawl_one_frontier(
    redis_server: RedisServer,
    testweb_factory: Callable[..., TestWeb],
    scrapyd_factory: Callable[[], ScrapydServer],
    tmp_path: Path,
) -> None:
    # Each worker the limit (one request at a time, none claimed ahead, pages
    # answering in 60-100 ms), not the sites' politeness: with 32 slots one worker
    # held all 6 hosts of a smaller web and the other claimed nothing (CI at 504c66d).
    web = testweb_factory(hosts=8, pages=10, latency_ms=(60, 100), links=3, cross_links=1)
    machines = [scrapyd_factory(), scrapyd_factory()]
    for machine in machines:
        done = run_deploy(REPO_ROOT, "--url", machine.url, "--version", "1")
        assert done.returncode == 0, done.stderr
        assert "spiders web" in done.stdout

    jobs = []
    for i, machine in enumerate(machines):
        settings = {
            "REDIS_URL": redis_server.url,
            "CRAWL_HOST_DELAY": DELAY,
            "CRAWL_IDLE_CLOSE_SECONDS": 2,
            "CRAWL_IDLE_POLL_SECONDS": 0.2,
            "CRAWL_DATA_DIR": tmp_path / f"data-{i}",  # nothing written in the checkout
            "CRAWL_GUARD_ALLOW": LOOPBACK_ALLOW,  # the test web is on loopback
            "LOG_LEVEL": "INFO",
            "CONCURRENT_REQUESTS": 1,
            "CRAWL_CLAIM_PREFETCH": 0,
        }
        fields = [("project", PROJECT), ("spider", "web"), ("_version", "1"),
                  ("crawl", "scrapyd"), ("seeds", ",".join(web.seeds))]  # fmt: skip
        fields += [("setting", f"{name}={value}") for name, value in settings.items()]
        answer = machine.post("schedule.json", fields)
        assert answer["status"] == "ok", answer
        jobs.append(answer["jobid"])
    for machine, job in zip(machines, jobs, strict=True):
        machine.wait_finished(PROJECT, [job], timeout=60)

    fetched = page_counts(web.log)
    assert set(fetched) == web.expected_urls
    assert all(n == 1 for n in fetched.values()), {u: n for u, n in fetched.items() if n > 1}
    for host, p in politeness_report(web.log, DELAY).items():
        assert p.max_in_flight <= 1, f"{host}: {p.max_in_flight} requests in flight at once"
        assert p.idle_below_delay == 0, f"{host}: end-to-start idle {p.min_idle:.3f}s < {DELAY}"
    for machine, job in zip(machines, jobs, strict=True):
        log = machine.job_log(PROJECT, "web", job)
        text = log.read_text(errors="replace")
        assert "Spider opened" in text and "'finish_reason': 'finished'" in text, text[-3000:]
        # Both machines worked: each fetched pages of the shared frontier.
        stats = stats_of(log)
        assert stats.get("frontier/claims", 0) > 0, stats
        assert stats.get("downloader/response_count", 0) > 0, stats


def copy_project(dest: Path, names: Sequence[str] = PROJECT_FILES) -> Path:
    for name in names:
        source = REPO_ROOT / name
        if source.is_dir():
            shutil.copytree(source, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, dest / name)
    return dest


def test_broken_egg_fails_the_deploy(
    scrapyd_factory: Callable[[], ScrapydServer], tmp_path: Path
) -> None:
    project = copy_project(tmp_path / "project")
    web_py = project / "spiders" / "web.py"
    # At the end: the module starts with a __future__ import.
    web_py.write_text(web_py.read_text() + "\nimport no_such_module_xyz  # noqa\n")
    server = scrapyd_factory()

    done = run_deploy(project, "--url", server.url, "--version", "1")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Deploy FAILED: Scrapyd refused the egg" in done.stderr
    assert "No module named 'no_such_module_xyz'" in done.stderr
    # The refused version does not stay behind as the latest.
    assert server.get("listversions.json", project=PROJECT)["versions"] == []

    # The trap this command avoids: scrapyd-deploy exits 0 and the broken egg stays.
    cfg = project / "scrapy.cfg"
    cfg.write_text(cfg.read_text().replace("http://127.0.0.1:6800/", server.url))
    scrapyd_deploy = Path(sys.executable).with_name("scrapyd-deploy")
    plain = run_deploy(project, "--version", "2", command=[str(scrapyd_deploy)])
    assert plain.returncode == 0, plain.stderr
    assert '"status": "error"' in plain.stdout
    assert server.get("listversions.json", project=PROJECT)["versions"] == ["2"]


def test_deploy_wants_setup_py_and_scrapyd_deploys_own_egg_is_complete(
    scrapyd_factory: Callable[[], ScrapydServer], tmp_path: Path
) -> None:
    # Our command builds with the project's setup.py and refuses without it.
    # scrapyd-deploy writes a setup.py with find_packages() then; with every
    # package folder holding an __init__.py and the package data declared in
    # pyproject.toml, that egg is complete too.
    names = [n for n in PROJECT_FILES if n != "setup.py"]
    project = copy_project(tmp_path / "project", names)
    server = scrapyd_factory()
    done = run_deploy(project, "--url", server.url)
    assert done.returncode == 1 and "setup.py is missing" in done.stderr, done.stderr

    egg = tmp_path / "scrapyd-deploy.egg"
    scrapyd_deploy = Path(sys.executable).with_name("scrapyd-deploy")
    built = run_deploy(project, "--build-egg", str(egg), command=[str(scrapyd_deploy)])
    assert built.returncode == 0, built.stderr
    with zipfile.ZipFile(egg) as built_egg:
        names_in_egg = built_egg.namelist()
    assert "crawlproject/frontier/scrapy_glue/scheduler.py" in names_in_egg
    assert "crawlproject/frontier/store/lua/claim.lua" in names_in_egg
