"""The documents say what the code does: README.md stays a short start, every
``CRAWL_*`` setting is on docs/settings.md, and what the docs name exists.

`mkdocs build --strict` (broken links, pages left out of the nav) runs in
./run tests beside pytest.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

import crawlproject.default_settings as defaults

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted((ROOT / "docs").glob("*.md"))
CODE_SPAN = re.compile(r"`([^`\n]+)`")
# Files the docs name as examples to write, not as files of the repository.
# Files the guides' examples create (docs/extending.md; run by its tests).
EXAMPLES = {
    "pipelines/content/json_links.py", "spiders/catalog.py", "pipelines/sqlite_records.py",
    "spiders/quotes.py",
}  # fmt: skip


def code_spans(*paths: Path) -> set[str]:
    return {s for p in paths for s in CODE_SPAN.findall(p.read_text())}


def declarations() -> dict[str, list[str]]:
    """The modules of crawlproject/default_settings/ that assign each ``CRAWL_*`` name."""
    where: dict[str, list[str]] = {}
    for module in sorted((ROOT / "crawlproject" / "default_settings").glob("*.py")):
        for node in ast.walk(ast.parse(module.read_text())):
            targets = (
                node.targets if isinstance(node, ast.Assign)
                else [node.target] if isinstance(node, ast.AnnAssign | ast.AugAssign)
                else []
            )  # fmt: skip
            for target in targets:
                if isinstance(target, ast.Name) and target.id.startswith("CRAWL_"):
                    where.setdefault(target.id, []).append(module.name)
    return where


def test_every_crawl_setting_is_declared_once_in_default_settings() -> None:
    """One module of the package declares each (a second would silently win
    in the package's star imports); the package exports exactly those."""
    where = declarations()
    assert {name: files for name, files in where.items() if len(files) > 1} == {}
    assert "__init__.py" not in {f for files in where.values() for f in files}
    assert set(where) == {name for name in vars(defaults) if name.startswith("CRAWL_")}
    assert sorted(defaults.__all__) == sorted(where)
    # Nowhere else in the code is a setting's default assigned at module level.
    for folder in ("crawlproject", "spiders", "middlewares", "pipelines"):
        for module in (ROOT / folder).rglob("*.py"):
            if "default_settings" in module.parts:
                continue
            for node in ast.parse(module.read_text()).body:
                names = [t.id for t in getattr(node, "targets", [getattr(node, "target", None)])
                         if isinstance(t, ast.Name)]  # fmt: skip
                assert not set(names) & set(where), module


def test_settings_page_lists_every_declared_crawl_setting_and_no_other() -> None:
    declared = set(declarations())
    page = (ROOT / "docs" / "settings.md").read_text()
    rows = [line for line in page.splitlines() if line.startswith("| `")]
    # The first cell of a row: one setting, or several separated by " / ".
    documented = {name for row in rows for name in re.findall(r"`(CRAWL_\w+)`", row.split("|")[1])}
    assert declared - documented == set(), "declared in default_settings/, not on settings.md"
    assert documented - declared == set(), "on settings.md, not declared in default_settings/"


def test_readme_is_a_short_start_with_the_two_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    quick = readme.split("## Quick start", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    commands = [line.split("#", 1)[0].strip() for line in quick.splitlines()]
    assert commands == ["./run demo", "./run tests"]
    # .ci/run runs the README's test command.
    assert "./run tests" in (ROOT / ".ci" / "run").read_text()
    for page in re.findall(r"\]\((docs/[^)]+\.md)\)", readme):
        assert (ROOT / page).is_file(), page


@pytest.mark.parametrize("doc", [*DOCS, ROOT / "README.md"], ids=lambda p: p.name)
def test_every_file_the_docs_name_exists(doc: Path) -> None:
    tops = ("crawlproject/", "spiders/", "middlewares/", "pipelines/", "bench/", "tests/")
    named = {
        s.split(" ")[0].rstrip(".,:")
        for s in code_spans(doc)
        if s.startswith((*tops, "testkit/", "docs/")) and "<" not in s and "*" not in s
    }
    missing = sorted(p for p in named - EXAMPLES if not (ROOT / p).exists())
    assert missing == []


@pytest.mark.parametrize("doc", [*DOCS, ROOT / "README.md"], ids=lambda p: p.name)
def test_every_class_path_the_docs_name_imports(doc: Path) -> None:
    dotted = re.compile(r"(crawlproject|spiders|middlewares|pipelines)(\.[A-Za-z_]\w*)+")
    for name in sorted(s for s in code_spans(doc) if dotted.fullmatch(s)):
        if name.startswith(("pipelines.content.json_links", "pipelines.sqlite_records")):
            continue  # the docs' examples
        module, _, attr = name.rpartition(".")
        try:
            importlib.import_module(name)
        except ImportError:
            assert hasattr(importlib.import_module(module), attr), name
