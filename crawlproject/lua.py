"""Loading a package's Redis Lua scripts (each package keeps its own in its
``lua/`` folder; a bottom-layer helper, so that no package imports another
one for it)."""

from __future__ import annotations

from importlib import resources

# Helpers every script on a frontier shard may call (host queues, bands):
# crawlproject/frontier/lua/_prelude.lua.
SHARD_PRELUDE = ("crawlproject.frontier", "_prelude")


def load_script(package: str, name: str, prelude: tuple[str, str] | None = None) -> str:
    """``<package>/lua/<name>.lua``, after ``prelude`` ((package, name)) if given."""
    body = (resources.files(package) / "lua" / f"{name}.lua").read_text()
    if prelude is None:
        return body
    pre_package, pre_name = prelude
    return (resources.files(pre_package) / "lua" / f"{pre_name}.lua").read_text() + "\n" + body
