"""Loading a package's Redis Lua scripts (each package keeps its own in its
``lua/`` folder; a bottom-layer helper, so that no package imports another
one for it).

A script goes to Redis after its preludes (shared helpers), but only with the
parts of them it uses (:func:`used_parts`). Redis runs a script's whole text
at every call, so every helper a prelude defines is a closure built, and later
collected, at every call, even by a script that never calls it: the shard
prelude in full cost ~67k Redis instructions a call on top of a bare
``return 1``'s ~15k, about what three seen tests cost, and a call may carry
a single page (bench/script_overhead.py).
"""

from __future__ import annotations

import itertools
import os
import re
import secrets
from dataclasses import dataclass
from functools import cache
from importlib import resources

Prelude = tuple[str, str]  # (package, name): <package>/lua/<name>.lua

# Helpers every script on a frontier shard may call (host queues, bands):
# crawlproject/frontier/store/lua/_prelude.lua.
SHARD_PRELUDE: Prelude = ("crawlproject.frontier.store", "_prelude")
# Host queues (queue_push, queue_pop, requeue), after SHARD_PRELUDE:
# crawlproject/frontier/store/lua/_queue.lua.
QUEUE_PRELUDE: Prelude = ("crawlproject.frontier.store", "_queue")
# What a script on a frontier shard goes after (each takes only the parts it uses).
SHARD_PRELUDES: tuple[Prelude, ...] = (SHARD_PRELUDE, QUEUE_PRELUDE)
# The shard's seen set (seen_test_and_add), after SHARD_PRELUDE, whose shard
# prefix P it uses: crawlproject/frontier/store/lua/_seen.lua, for add.lua.
SEEN_PRELUDE: Prelude = ("crawlproject.frontier.store", "_seen")

# The Lua tokens that matter here: comments and strings (skipped: a name in
# them is not a use), and names.
_TOKENS = re.compile(
    r"--\[(=*)\[.*?\]\1\]"  # long comment
    r"|--[^\n]*"  # comment
    r"|\[(=*)\[.*?\]\2\]"  # long string
    r"|\"(?:\\.|[^\"\\\n])*\""
    r"|'(?:\\.|[^'\\\n])*'"
    r"|([A-Za-z_][A-Za-z0-9_]*)",
    re.S,
)
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
# A top-level statement that defines names: ``local function f``, ``function
# f`` (a local declared before), ``local a, b [= ...]``, ``a, b = ...``.
_DEFINITION = re.compile(
    rf"(?:local\s+function\s+|function\s+)({_NAME})"
    rf"|local\s+({_NAME}(?:\s*,\s*{_NAME})*)"
    rf"|({_NAME}(?:\s*,\s*{_NAME})*)\s*=(?!=)"
)
# Lines at column 0 that go on with the statement above them.
_CONTINUATION = re.compile(r"(?:end|else|elseif|until)\b|[)}\]]")


def names(code: str) -> set[str]:
    """The names Lua ``code`` mentions outside its comments and strings (field
    names too: more than it uses, never fewer)."""
    return {m.group(3) for m in _TOKENS.finditer(code) if m.group(3)}


@dataclass(frozen=True)
class _Part:
    text: str
    defines: frozenset[str]
    uses: frozenset[str]
    always: bool  # comments only, or a statement that defines nothing


def _is_comment(line: str) -> bool:
    return not line.strip() or line.startswith("--")


@cache  # one parse per prelude text and process, whatever the scripts and clients
def _parts(prelude: str) -> tuple[_Part, ...]:
    """A prelude's top-level statements (a line at column 0 starts one), each
    with the comment lines above it. Preludes are written so: everything
    inside a function is indented, and no long string spans lines."""
    chunks: list[list[str]] = [[]]
    for line in prelude.split("\n"):
        starts = bool(line[:1].strip()) and not _is_comment(line) and not _CONTINUATION.match(line)
        if starts:
            head: list[str] = []  # the comments above it go with it
            while chunks[-1] and _is_comment(chunks[-1][-1]):
                head.insert(0, chunks[-1].pop())
            chunks.append(head)
        chunks[-1].append(line)
    parts = []
    for lines in chunks:
        text = "\n".join(lines)
        statement = next((ln for ln in lines if not _is_comment(ln)), "")
        m = _DEFINITION.match(statement)
        defined = (
            frozenset(re.split(r"\s*,\s*", next(g for g in m.groups() if g))) if m else frozenset()
        )
        parts.append(_Part(text, defined, frozenset(names(text) - defined), not m))
    return tuple(parts)


def used_parts(prelude: str, script: str) -> str:
    """The statements of ``prelude`` that ``script`` needs, in the prelude's
    order: those defining a name it mentions, then those defining a name they
    mention, and so on; and every statement that defines nothing (kept for
    its effect). Names are matched as words, so a part is kept whenever its
    name appears in code that is kept, called or not: never fewer."""
    parts = _parts(prelude)
    keep = [p.always for p in parts]
    wanted = names(script).union(*(p.uses for p in parts if p.always))
    grew = True
    while grew:
        grew = False
        for i, part in enumerate(parts):
            if not keep[i] and part.defines & wanted:
                keep[i] = grew = True
                wanted |= part.uses
    return "\n".join(p.text for p, k in zip(parts, keep, strict=True) if k)


def read_lua(package: str, name: str) -> str:
    return (resources.files(package) / "lua" / f"{name}.lua").read_text()


@cache  # the files do not change while a process runs; every client loads them
def load_script(package: str, name: str, prelude: Prelude | None = None, *more: Prelude) -> str:
    """``<package>/lua/<name>.lua``, after what it uses of ``prelude``
    ((package, name)) if given and of the ``more`` preludes after it."""
    return with_preludes(read_lua(package, name), *([prelude] if prelude else []), *more)


def preludes_text(*preludes: Prelude) -> str:
    """The ``preludes`` whole, in their order."""
    return "".join(read_lua(p, n) + "\n" for p, n in preludes)


def with_preludes(script: str, *preludes: Prelude) -> str:
    """Lua ``script`` after what it uses of ``preludes``, in their order."""
    if not preludes:
        return script
    return used_parts(preludes_text(*preludes), script) + "\n" + script


# -- a script that runs once per call id (issue 35, item 3) ---------------------------
#
# A reply lost after the script ran (a connection closed under it) leaves the
# caller unable to tell whether it ran; redis-py's cluster client then sends
# it again, and so do our own loops (the outbox's failed batch, the address
# gate's releases). A script wrapped by :func:`once_per_call` takes one more
# key, the last: ``<its slot's tag prefix>c:<call id>``. The first run stores
# its reply there (cmsgpack: exact integers, nested tables, {ok=}/{err=}
# tables; cjson rounds integers past 14 digits) for ``ttl_ms``; a run that
# finds it returns it and does nothing else. The body sees KEYS without that
# key, so no script changes. Kept tiny: Redis runs the whole text every call.
_ONCE_HEAD = (
    "local _call_key = KEYS[#KEYS]\n"
    "local _reply = redis.call('GET', _call_key)\n"
    "if _reply then return cmsgpack.unpack(_reply) end\n"
    "KEYS[#KEYS] = nil\n"
    "_reply = (function()\n"
)
_ONCE_TAIL = (
    "\nend)()\nredis.call('SET', _call_key, cmsgpack.pack(_reply), 'PX', %d)\nreturn _reply\n"
)
# How long a reply is kept past the outage a caller rides through (the outbox
# sends a failed batch again within CRAWL_REDIS_OUTAGE_SECONDS of its first
# failure; redis-py's cluster client within seconds): the time a call may
# take to fail (a socket timeout) and the back-off's last wait.
CALL_REPLY_MARGIN_SECONDS = 30.0
CALL_KEY = "c:"  # after a tag prefix (crawlproject/frontier/store/keys.py's key table)


@cache
def once_per_call(script: str, ttl_ms: int) -> str:
    """``script`` run at most once per call id (the last key): see above."""
    return _ONCE_HEAD + script + _ONCE_TAIL % ttl_ms


class CallIds:
    """Call ids unique to this process: a random part (10 hex digits: a fleet of
    1,000 processes has two sharing it with odds of ~5e-7) and a counter. A caller
    keeps a call's id for its own resends of that call."""

    def __init__(self) -> None:
        self.renew()
        # A forked child (multiprocessing, a benchmark's workers) must not
        # reuse its parent's ids.
        os.register_at_fork(after_in_child=self.renew)

    def renew(self) -> None:
        self._process = secrets.token_hex(5)
        self._count = itertools.count(1)

    def new(self) -> str:
        return f"{self._process}{next(self._count):x}"


CALL_IDS = CallIds()  # one per process: the ids of every client of the process
