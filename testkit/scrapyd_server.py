"""A real Scrapyd on a free loopback port, for tests; it runs spiders from eggs only.

Scrapyd reads ``scrapyd.conf`` from its working directory, so each server gets
a temporary folder with its own config (eggs, logs and databases inside) and
runs there. Job processes are ``sys.executable -m scrapyd.runner`` with
Scrapyd's environment and working directory, so nothing of the checkout may be
reachable from them, or a test would pass on a broken egg:

* no ``PYTHONPATH``, and the working directory is the temporary folder (no
  ``scrapy.cfg`` above it, which Scrapy would put on ``sys.path``);
* the dev venv has the project installed *editable*: a ``.pth`` hook installs an
  import finder that maps ``crawlproject``, ``spiders``... to the checkout, and
  it serves whatever the egg lacks (a package missing from the egg silently
  comes from the checkout). So Scrapyd runs on an *isolated interpreter*: a
  venv without packages of its own whose ``.pth`` file puts the dev venv's
  site-packages on ``sys.path`` as a plain path. Path lines in a ``.pth`` do
  not process the ``.pth`` hooks found there, so the project's dependencies
  import and the project itself does not, as on a real Scrapyd host.
"""

from __future__ import annotations

import json
import os
import subprocess
import sysconfig
import tempfile
import time
import venv
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.error import URLError
from urllib.parse import urlencode
from urllib.request import urlopen

from testkit.processes import free_port, stop_process

# Variables that would let job processes import the checkout or pick a project.
SCRUBBED_ENV = ("PYTHONPATH", "PYTHONHOME", "SCRAPY_SETTINGS_MODULE", "SCRAPY_PROJECT")


def isolated_python(folder: Path) -> Path:
    """A python that imports this interpreter's packages but not its editable installs."""
    python = folder / "bin" / "python"
    if not python.exists():
        venv.EnvBuilder(with_pip=False, symlinks=True).create(folder)
        purelib = Path(sysconfig.get_path("purelib", vars={"base": str(folder)}))
        ours = dict.fromkeys([sysconfig.get_path("purelib"), sysconfig.get_path("platlib")])
        (purelib / "dev-venv-packages.pth").write_text("".join(f"{p}\n" for p in ours))
    return python


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


class ScrapydServer:
    """One Scrapyd process with its own folder (config, eggs, logs, dbs)."""

    def __init__(
        self, folder: Path | None = None, max_proc: int = 2, poll_interval: float = 0.5
    ) -> None:
        self.max_proc = max_proc
        self.poll_interval = poll_interval
        self.dir = folder or Path(tempfile.mkdtemp(prefix="test-scrapyd-"))
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    @property
    def logs_dir(self) -> Path:
        return self.dir / "logs"

    @property
    def server_log(self) -> Path:
        return self.dir / "scrapyd.out"

    def job_log(self, project: str, spider: str, job: str) -> Path:
        return self.logs_dir / project / spider / f"{job}.log"

    def _write_config(self, port: int) -> None:
        (self.dir / "scrapyd.conf").write_text(
            "[scrapyd]\n"
            "bind_address = 127.0.0.1\n"
            f"http_port = {port}\n"
            f"eggs_dir = {self.dir / 'eggs'}\n"
            f"logs_dir = {self.logs_dir}\n"
            f"dbs_dir = {self.dir / 'dbs'}\n"
            "items_dir =\n"
            f"max_proc = {self.max_proc}\n"
            f"poll_interval = {self.poll_interval}\n"
        )

    def start(self, timeout: float = 30.0) -> ScrapydServer:
        python = isolated_python(self.dir / "python")
        # A port picked by bind(0) can be taken before twistd binds it: retry.
        for _ in range(3):
            port = free_port()
            self._write_config(port)
            with open(self.server_log, "ab") as out:
                self.proc = subprocess.Popen(
                    [str(python), "-m", "scrapyd"], cwd=self.dir, env=clean_env(),
                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                )  # fmt: skip
            self.port = port
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    if self.get("daemonstatus.json").get("status") == "ok":
                        return self
                except (URLError, OSError):
                    pass
                time.sleep(0.05)
            stop_process(self.proc, graceful=False)
        raise RuntimeError(f"scrapyd did not start:\n{self.log_tail()}")

    def get(self, endpoint: str, **query: str) -> dict[str, Any]:
        url = self.url + endpoint + (f"?{urlencode(query)}" if query else "")
        with urlopen(url, timeout=30) as resp:
            return dict(json.loads(resp.read()))

    def post(self, endpoint: str, fields: Sequence[tuple[str, str]]) -> dict[str, Any]:
        """POST form fields (a list: ``setting`` repeats for schedule.json)."""
        with urlopen(self.url + endpoint, data=urlencode(fields).encode(), timeout=30) as resp:
            return dict(json.loads(resp.read()))

    def wait_finished(self, project: str, jobs: Sequence[str], timeout: float = 60) -> None:
        """Wait until every job is in listjobs.json's ``finished`` list."""
        deadline = time.monotonic() + timeout
        while True:
            finished = {j["id"] for j in self.get("listjobs.json", project=project)["finished"]}
            if set(jobs) <= finished:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"jobs {sorted(set(jobs) - finished)} not finished\n")
            time.sleep(0.2)

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.server_log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)
            self.proc = None

    def __enter__(self) -> ScrapydServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
