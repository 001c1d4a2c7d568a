"""A scratch copy of the project, as a user's checkout: what a test drops a
spider or a settings line into without touching the repository."""

from __future__ import annotations

import shutil
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
# What `scrapy crawl` needs from a checkout: scrapy.cfg and the project's packages.
PROJECT = ("scrapy.cfg", "crawlproject", "spiders", "middlewares", "pipelines")


def scratch_project(tmp_path: Path) -> Path:
    """``tmp_path/project``: a copy of the project (no caches)."""
    root = tmp_path / "project"
    root.mkdir()
    for name in PROJECT:
        source = REPO_ROOT / name
        if source.is_dir():
            shutil.copytree(source, root / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, root / name)
    return root
