"""Plain Scrapy in a venv of its own: the CPU-bound benchmark's anchor.

``python()`` gives the interpreter of ``bench/results/plain-scrapy-<version>/``,
a venv holding pip's Scrapy of the version this project's venv runs (and what
pip brings with it), nothing else; made on first use (about 10 s; needs the
package index ``pip`` is set up for). ``bench/plain_project/`` is the Scrapy
project it runs. So the anchor is Scrapy as a user installs it, not this
project with parts turned off.
"""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROJECT = REPO / "bench" / "plain_project"
SPIDER = "plainweb"


def scrapy_version() -> str:
    """The Scrapy this project runs: the anchor gets the same release."""
    return version("scrapy")


def python() -> Path:
    """The plain venv's interpreter, the venv made (once) if missing."""
    venv = REPO / "bench" / "results" / f"plain-scrapy-{scrapy_version()}"
    exe = venv / "bin" / "python"
    if not (venv / "ready").exists():
        # Without PYTHONPATH: pip would see this checkout's packages (and egg-info).
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True, env=env)
        subprocess.run(
            [str(exe), "-m", "pip", "install", "-q", f"scrapy=={scrapy_version()}"],
            check=True,
            env=env,
        )
        (venv / "ready").write_text(scrapy_version() + "\n")
    return exe
