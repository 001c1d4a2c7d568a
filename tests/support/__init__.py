"""Moved: the test infrastructure is the top-level ``testkit`` package, shared
with bench/ (benchmarks import no test module). Import ``testkit.<module>``.

``tests.support.<module>`` still resolves, to the very module object of
``testkit.<module>`` (not a copy), so code written against the old path keeps
working while it is changed; a module that still lives in this folder is found
here first.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from types import ModuleType

_PREFIX = __name__ + "."


class _Alias(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self.target = target
        self.spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(self.target)
        self.spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # testkit.<module> ran already; importlib gave it the alias's __spec__
        module.__spec__ = self.spec


class _AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(_PREFIX):
            return None
        name = "testkit." + fullname[len(_PREFIX) :]
        if importlib.util.find_spec(name) is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias(name))


if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
    sys.meta_path.append(_AliasFinder())  # after the path finder: files here win
