"""What a frontier script call costs Redis before its own work: its preludes.

    .venv/bin/python bench/script_overhead.py [--calls 300]

Redis runs a script's whole text at every EVALSHA, so every helper its
preludes define is a closure made (and collected) at every call. For each
script with a prelude, the text it is sent as (crawlproject/lua.py: only the
prelude parts it uses) and the text with the preludes whole, each with the
script's own code replaced by ``return 1``, are called ``--calls`` times on a
redis-server under valgrind's callgrind (bench/frontier_profile.py's
CallgrindRedis, instrumented only while they run, after a warm-up call):
Redis's instructions per call, the same at any load. ``return 1`` alone is the
cost of any EVALSHA (the command, its reply, the script's environment).

A frontier call carries as many pages as its batch (a worker's claim, add,
release and ack calls; bench/frontier_ops.py batches 64 pages), so this is a
cost per call, not per page.

Results: bench/results/script_overhead.json.
"""

from __future__ import annotations

import argparse

import frontier_profile
from benchlib import result_record, write_result
from frontier_profile import RESULTS, CallgrindRedis

from crawlproject.frontier.claims.address_scripts import (
    ADDRESS_SCRIPTS,
    HOST_SCRIPTS,
    address_script_preludes,
)
from crawlproject.frontier.store.keys import CrawlKeys
from crawlproject.frontier.store.scripts import FRONTIER_SCRIPTS, script_preludes
from crawlproject.lua import SHARD_PRELUDES, Prelude, preludes_text, read_lua, used_parts

# script -> (package, its preludes), as the clients load them
SCRIPTS: dict[str, tuple[str, tuple[Prelude, ...]]] = {
    **{name: ("crawlproject.frontier.store", script_preludes(name)) for name in FRONTIER_SCRIPTS},
    **{
        name: ("crawlproject.frontier.store", address_script_preludes(name))
        for name in (*ADDRESS_SCRIPTS, *HOST_SCRIPTS)
    },
    "recrawl_promote": ("crawlproject.recrawl", SHARD_PRELUDES),
}
BARE = "return 1"


def texts() -> dict[str, str]:
    """Case name -> Lua text: ``bare``, ``<script>_whole``, ``<script>_used``."""
    out = {"bare": BARE}
    for name, (package, preludes) in SCRIPTS.items():
        head = preludes_text(*preludes)
        out[f"{name}_whole"] = head + BARE
        out[f"{name}_used"] = used_parts(head, read_lua(package, name)) + "\n" + BARE
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=300)
    a = p.parse_args()
    cases = texts()
    server = CallgrindRedis(RESULTS / "callgrind")
    keys = CrawlKeys("bench", 1)  # a new crawl's tag
    prefix = keys.shard_prefixes[0]
    server.client.set(prefix + "mode", "score")
    args = (1, keys.ready(0), prefix)
    try:
        for name, text in cases.items():
            sha = server.client.script_load(text)
            server.client.evalsha(sha, *args)  # warm-up: compiled, cached
            server.start()
            for _ in range(a.calls):
                server.client.evalsha(sha, *args)
            server.stop(name)
        frontier_profile.PHASES = tuple(cases)
        counts = server.instructions()
    finally:
        server.stop_server()
    per_call = {name: round(counts.get(name, 0) / a.calls) for name in cases}
    bare = per_call["bare"]
    rows = {
        name: {"whole": per_call[f"{name}_whole"] - bare, "used": per_call[f"{name}_used"] - bare}
        for name in SCRIPTS
    }
    print(f"EVALSHA of `return 1`: {bare:,} Redis instructions a call")
    print("preludes' cost a call, whole -> the parts the script uses:")
    for name, row in rows.items():
        print(f"  {name:16} {row['whole']:>8,} -> {row['used']:>8,}")
    out = write_result(
        "script_overhead.json",
        result_record("script_overhead", calls=a.calls, bare=bare, preludes=rows),
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
