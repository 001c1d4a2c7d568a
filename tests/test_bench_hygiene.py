"""Benchmarks run from a fresh checkout and import no test module.

What tests and benchmarks share lives in testkit/ (issue 17, item 4); every
command in BENCHMARKS.md and in a benchmark's docstring is
``.venv/bin/python bench/<script>.py ...``, run from the repository's root,
never a path outside it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "bench").glob("*.py"))
OUTSIDE = re.compile(r"/work/|/home/|/tmp/base|\.\./|PATH=/usr/bin")


def imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_a_benchmark_imports_no_test_module(script: Path) -> None:
    tests = sorted(m for m in imported_modules(script) if m == "tests" or m.startswith("tests."))
    assert tests == [], "move what it needs to testkit/"


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_a_benchmark_names_no_path_outside_the_repository(script: Path) -> None:
    assert OUTSIDE.findall(script.read_text()) == []


def test_benchmarks_md_commands_run_from_a_fresh_checkout() -> None:
    text = (ROOT / "BENCHMARKS.md").read_text()
    assert OUTSIDE.findall(text) == []
    commands = [s for s in re.findall(r"`([^`\n]+)`", text) if "python" in s]
    assert commands, "BENCHMARKS.md lists its commands"
    for command in commands:
        assert command.startswith(".venv/bin/python bench/"), command
        script = command.split()[1]
        assert (ROOT / script).is_file(), command
