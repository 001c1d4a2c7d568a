"""requirements.txt declares every third-party package the runtime code imports,
and nothing the runtime does not use (tools belong in requirements-dev.txt)."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
RUNTIME_PACKAGES = ("crawlproject", "spiders", "middlewares", "pipelines")
# crawlproject/demo.py serves its demo web with testkit/'s synthetic web (what
# tests and benchmarks share), from a checkout (./run demo); a Scrapyd host
# never runs the demo.
NOT_THIRD_PARTY = {*RUNTIME_PACKAGES, "tests", "testkit"}


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()  # PEP 503


def runtime_imports() -> dict[str, set[str]]:
    """Top-level module -> the files importing it, over the runtime packages."""
    found: dict[str, set[str]] = {}
    for package in RUNTIME_PACKAGES:
        for path in (REPO_ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names: list[str] = []
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                for name in names:
                    top = name.split(".")[0]
                    if top not in sys.stdlib_module_names and top not in NOT_THIRD_PARTY:
                        found.setdefault(top, set()).add(str(path.relative_to(REPO_ROOT)))
    return found


def declared(path: Path) -> set[str]:
    names = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            names.add(_normalized(re.split(r"[\s\[<>=!~;]", line, maxsplit=1)[0]))
    return names


def test_every_runtime_import_is_declared_in_requirements_txt() -> None:
    distributions = importlib.metadata.packages_distributions()
    runtime = declared(REPO_ROOT / "requirements.txt")
    imports = runtime_imports()
    assert {"scrapy", "redis", "numpy", "lxml", "twisted"} <= set(imports)  # the scan works
    missing = {}
    for module, files in sorted(imports.items()):
        dists = {_normalized(d) for d in distributions.get(module, [])}
        assert dists, f"{module} (imported by {sorted(files)}) is not installed"
        if not dists & runtime:
            missing[module] = (sorted(dists), sorted(files))
    assert not missing, f"imported at run time, not in requirements.txt: {missing}"


def test_requirements_txt_holds_only_what_the_runtime_imports() -> None:
    distributions = importlib.metadata.packages_distributions()
    imported = {
        _normalized(d) for module in runtime_imports() for d in distributions.get(module, [])
    }
    unused = declared(REPO_ROOT / "requirements.txt") - imported
    assert not unused, f"in requirements.txt, imported by no runtime module: {sorted(unused)}"
    dev = declared(REPO_ROOT / "requirements-dev.txt")
    assert {"scrapy-redis", "simhash", "pytest"} <= dev  # tests and benchmarks use them
