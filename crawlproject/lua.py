"""Loading a package's Redis Lua scripts (each package keeps its own in its
``lua/`` folder; a bottom-layer helper, so that no package imports another
one for it)."""

from __future__ import annotations

from importlib import resources

Prelude = tuple[str, str]  # (package, name): <package>/lua/<name>.lua

# Helpers every script on a frontier shard may call (host queues, bands):
# crawlproject/frontier/lua/_prelude.lua.
SHARD_PRELUDE: Prelude = ("crawlproject.frontier", "_prelude")
# The shard's seen set (seen_test_and_add), after SHARD_PRELUDE, whose shard
# prefix P it uses: crawlproject/frontier/lua/_seen.lua, for add.lua.
SEEN_PRELUDE: Prelude = ("crawlproject.frontier", "_seen")


def _read(package: str, name: str) -> str:
    return (resources.files(package) / "lua" / f"{name}.lua").read_text()


def load_script(package: str, name: str, prelude: Prelude | None = None, *more: Prelude) -> str:
    """``<package>/lua/<name>.lua``, after ``prelude`` ((package, name)) if
    given, and after it the ``more`` preludes, in order."""
    preludes = ([prelude] if prelude is not None else []) + list(more)
    return "".join(_read(p, n) + "\n" for p, n in preludes) + _read(package, name)
