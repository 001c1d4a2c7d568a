"""Builds the project's Scrapyd egg (``python -m crawlproject.deploy``, ``scrapyd-deploy``).

Everything about the package (metadata, packages, ``*.lua`` package data, the
``scrapy`` entry point Scrapyd reads the settings module from) lives in
pyproject.toml; ``setup()`` reads it from there. This file exists for two reasons:

* ``scrapyd-deploy`` runs ``setup.py bdist_egg`` and, when there is no setup.py,
  writes its own with ``find_packages()``, which drops every package directory
  without an ``__init__.py`` (``crawlproject/frontier`` among them) and the
  ``.lua`` files: an egg that fails on the Scrapyd host only.
* Scrapyd imports the project from the zipped egg. On Python < 3.13 zipimport
  finds no implicit namespace package inside an egg (bdist_egg writes no
  directory entries), so ``import crawlproject.frontier`` fails there although it
  works from the checkout. The build gives each such package directory an empty
  ``__init__.py`` in the built egg (the checkout is left as it is).
"""

from __future__ import annotations

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPyWithInits(build_py):
    """``build_py`` that turns implicit namespace packages holding modules into
    regular packages in the build directory (see the module docstring)."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):  # editable installs map the checkout
            return
        for package in self.packages or ():
            pkg_dir = Path(self.build_lib, *package.split("."))
            init = pkg_dir / "__init__.py"
            if pkg_dir.is_dir() and not init.exists() and any(pkg_dir.glob("*.py")):
                init.write_text("")


setup(cmdclass={"build_py": BuildPyWithInits})
