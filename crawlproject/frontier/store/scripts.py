"""The frontier's Lua scripts (crawlproject/frontier/store/lua/): which there
are, the preludes each goes after, and loading one (through crawlproject/lua.py)."""

from __future__ import annotations

from crawlproject.lua import SEEN_PRELUDE, SHARD_PRELUDES, Prelude, load_script

# The frontier's scripts on a shard (crawlproject/frontier/store/lua/), each after
# its preludes (script_preludes), run once per call id (lua.py once_per_call).
FRONTIER_SCRIPTS = (
    "claim",
    "add",
    "release",
    "ack",
    "renew",
    "reclaim",
    "host_config",
    "park_host",
    "unpark",
    "budget_release",
)


# Host budgets (host_budget, the overflow lists), after SHARD_PRELUDES:
# crawlproject/frontier/store/lua/_budget.lua.
BUDGET_PRELUDE: Prelude = ("crawlproject.frontier.store", "_budget")


def script_preludes(name: str) -> tuple[Prelude, ...]:
    """The preludes a frontier script goes after."""
    if name == "add":  # the seen test: crawlproject/frontier/store/lua/_seen.lua
        return (*SHARD_PRELUDES, BUDGET_PRELUDE, SEEN_PRELUDE)
    if name == "budget_release":
        return (*SHARD_PRELUDES, BUDGET_PRELUDE)
    return SHARD_PRELUDES


def load_lua(name: str, prelude: bool = True) -> str:
    """A frontier script (crawlproject/frontier/store/lua/), after its preludes."""
    preludes = script_preludes(name) if prelude else ()
    return load_script("crawlproject.frontier.store", name, *preludes)
