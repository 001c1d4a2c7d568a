"""Scripts go to Redis with only the prelude parts they use (crawlproject/lua.py):
what a script names is kept, with what that names in turn, and nothing a
kept part needs is ever left out. Pure logic; every script's real runs are
the frontier tests'."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from crawlproject.dedupe import calls as dedupe_calls
from crawlproject.dedupe.calls import INDEX_PRELUDE
from crawlproject.frontier.claims.address_scripts import (
    ADDRESS_SCRIPTS,
    HOST_SCRIPTS,
    address_script_preludes,
)
from crawlproject.frontier.store.scripts import FRONTIER_SCRIPTS, script_preludes
from crawlproject.lua import (
    SHARD_PRELUDES,
    Prelude,
    load_script,
    names,
    preludes_text,
    used_parts,
)

PRELUDE = """-- header comment
local P = ARGV[1]
local call, fmt = redis.call, string.format
local UNUSED = 7

-- says 'helper'
local function helper(x)
  return call('GET', P .. x)
end

local function outer(x)
  if x then
    return helper(x)
  end
end
local seen_a, seen_b
function seen_a() return fmt('%d', 1) end
function seen_b() return 2 end
"""


def kept(script: str) -> str:
    return used_parts(PRELUDE, script)


def test_a_named_function_comes_with_what_it_names() -> None:
    text = kept("return outer('k')")
    assert "local function outer" in text and "local function helper" in text
    assert "local P = ARGV[1]" in text and "local call, fmt" in text
    assert "UNUSED" not in text and "seen_a" not in text
    assert "-- says 'helper'" in text  # a part's comments go with it


def test_names_in_comments_and_strings_are_not_uses() -> None:
    assert "helper" not in kept("-- outer(x)\nreturn 'helper'")
    assert names("local a = 'b' -- c\nd[[e]] = f") == {"local", "a", "d", "f"}


def test_a_declared_local_comes_with_its_definition() -> None:
    text = kept("return seen_a()")
    assert "local seen_a, seen_b" in text and "function seen_a()" in text
    assert "function seen_b()" not in text


def test_statements_that_define_nothing_are_kept() -> None:
    text = used_parts(PRELUDE + "redis.setresp(3)\n", "return 1")
    assert text.strip().endswith("redis.setresp(3)")


# Every script loaded after a prelude, with its preludes, as the clients load them.
SCRIPTS: list[tuple[str, str, tuple[Prelude, ...]]] = [
    *[("crawlproject.frontier.store", n, script_preludes(n)) for n in FRONTIER_SCRIPTS],
    *[
        ("crawlproject.frontier.store", n, address_script_preludes(n))
        for n in (*ADDRESS_SCRIPTS, *HOST_SCRIPTS)
    ],
    ("crawlproject.recrawl", "recrawl_promote", SHARD_PRELUDES),
]


# A top-level definition in a prelude, found line by line (not by lua.py's parser).
DEFINITION = re.compile(
    r"^(?:local function (\w+)|function (\w+)|local ([\w, ]+?))\s*(?:[=(]|--|$)"
)


def definitions(prelude: str) -> dict[str, list[str]]:
    """Name -> the prelude lines that define it."""
    out: dict[str, list[str]] = {}
    for line in prelude.split("\n"):
        m = DEFINITION.match(line)
        if m:
            for n in (m.group(1) or m.group(2) or m.group(3)).split(","):
                out.setdefault(n.strip(), []).append(line)
    return out


@pytest.mark.parametrize(("package", "name", "preludes"), SCRIPTS, ids=[s[1] for s in SCRIPTS])
def test_a_loaded_script_defines_every_prelude_name_it_mentions(
    package: str, name: str, preludes: tuple[Prelude, ...]
) -> None:
    whole = preludes_text(*preludes)
    loaded = load_script(package, name, *preludes)
    lines = set(loaded.split("\n"))
    mentioned = names(loaded)
    defs = definitions(whole)
    assert {"P", "NOW"} <= defs.keys()  # the line-by-line reading finds them
    missing = [n for n, ds in defs.items() if n in mentioned and not all(d in lines for d in ds)]
    assert not missing, f"{name} mentions {missing}, left out of its prelude parts"


def test_a_script_that_needs_little_of_its_prelude_gets_little() -> None:
    whole = preludes_text(*SHARD_PRELUDES)
    loaded = load_script("crawlproject.frontier.store", "renew", *SHARD_PRELUDES)
    assert "local P = ARGV[1]" in loaded and "local function queue_pop" not in loaded
    assert len(loaded) < len(whole) / 4


# -- the duplicate index's scripts and their helpers (crawlproject/dedupe/lua/) --------

DEDUPE_LUA = Path(dedupe_calls.__file__).parent / "lua"
DEDUPE_SCRIPTS = sorted(p.stem for p in DEDUPE_LUA.glob("*.lua") if not p.stem.startswith("_"))


@pytest.mark.parametrize("name", DEDUPE_SCRIPTS)
def test_a_duplicate_index_script_gets_every_helper_it_names(name: str) -> None:
    whole = preludes_text(INDEX_PRELUDE)
    loaded = load_script("crawlproject.dedupe", name, INDEX_PRELUDE)
    lines, mentioned = set(loaded.split("\n")), names(loaded)
    defs = definitions(whole)
    assert {"near_distance", "bucket_split"} <= defs.keys()
    missing = [n for n, ds in defs.items() if n in mentioned and not all(d in lines for d in ds)]
    assert not missing, f"{name} mentions {missing}, left out of its prelude parts"


def test_the_hamming_distance_and_a_bucket_split_are_written_once_in_lua() -> None:
    """Issue 42 item 5: dedupe.lua and spread_lookup.lua each kept a copy of the
    distance (a popcount table and bit.bxor), dedupe.lua and spread_split.lua
    of a bucket's split; now _prelude.lua alone (calls.py load_script).
    dedupe.lua itself went with the one-tag layout (issue 42)."""
    copies = {
        p.name: sum(p.read_text().count(s) for s in ("bxor(", "table.concat(move)"))
        for p in DEDUPE_LUA.glob("*.lua")
    }
    assert copies.pop("_prelude.lua") == 9  # 8 bytes' distances, 1 split
    assert copies == dict.fromkeys(copies, 0)
    assert "near_distance" in load_script("crawlproject.dedupe", "spread_lookup", INDEX_PRELUDE)
    assert "bucket_split" in load_script("crawlproject.dedupe", "spread_split", INDEX_PRELUDE)
    assert not (DEDUPE_LUA / "dedupe.lua").exists()
