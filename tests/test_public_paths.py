"""Dotted paths a user may have written keep working after the frontier's move
into rooms (issue 42): ``SCHEDULER`` and ``ADDONS`` in users' settings and in
Scrapyd-deployed projects, ``ItemNotSaved`` in their pipelines, and every
``crawlproject.*`` path the docs and the README name."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest
from scrapy.utils.misc import load_object

from crawlproject import settings
from crawlproject.frontier.basics.outcomes import ItemNotSaved
from crawlproject.frontier.crawl.scrapy_politeness import ScrapyPoliteness
from crawlproject.frontier.scrapy_glue.scheduler import FrontierScheduler

REPO = Path(__file__).resolve().parent.parent
DOTTED = re.compile(r"\bcrawlproject(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
FILE_SUFFIXES = {"egg", "py", "md", "toml", "cfg", "json", "log", "lua"}  # file names, not paths


def documented_paths() -> list[str]:
    texts = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    found = {m.group(0) for text in texts for m in DOTTED.finditer(text.read_text())}
    return sorted(p for p in found if p.rsplit(".", 1)[-1] not in FILE_SUFFIXES)


def resolve(path: str) -> object:
    """A module, or an object in one (``pkg.module.Name``)."""
    try:
        return load_object(path)
    except (ValueError, NameError, ModuleNotFoundError):
        # load_object wants module.attr: a bare module path loads as a module
        return importlib.import_module(path)


@pytest.mark.parametrize(
    ("path", "obj"),
    [
        ("crawlproject.frontier.scheduler.FrontierScheduler", FrontierScheduler),
        ("crawlproject.frontier.scrapy_politeness.ScrapyPoliteness", ScrapyPoliteness),
        ("crawlproject.frontier.outcomes.ItemNotSaved", ItemNotSaved),
    ],
)
def test_documented_paths_are_the_frontier_classes(path: str, obj: object) -> None:
    assert load_object(path) is obj


def test_project_settings_name_the_documented_paths() -> None:
    assert settings.SCHEDULER == "crawlproject.frontier.scheduler.FrontierScheduler"
    assert "crawlproject.frontier.scrapy_politeness.ScrapyPoliteness" in settings.ADDONS


def test_every_path_the_docs_name_resolves() -> None:
    paths = documented_paths()
    assert "crawlproject.frontier.outcomes.ItemNotSaved" in paths  # docs/extending.md
    missing = []
    for path in paths:
        try:
            resolve(path)
        except (ImportError, AttributeError, ValueError, NameError) as exc:
            missing.append(f"{path}: {exc}")
    assert not missing, "\n".join(missing)
