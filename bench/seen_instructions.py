"""Redis instructions (and simulated cache misses) per seen test, by set size.

    .venv/bin/python bench/seen_instructions.py [--sizes 1000000,16000000] [--cache-sim]

One shard's exact seen set bulk-loaded with N random fingerprints
(testkit/seen_table.py, the sets the script builds), then batches of 500
fingerprints (half loaded, half new) through the real _seen.lua
(testkit/seen_table.py's SEEN_DRIVER) on a redis-server under valgrind's
callgrind (bench/frontier_profile.py's CallgrindRedis), instrumented only
while the batches run; the first batch warms the script and is not counted.
Per seen test: instructions (the same at any load: revisions and sizes
compare on a shared machine) and, with ``--cache-sim``, callgrind's simulated
cache misses (D1mr / DLmr: first-level / last-level data read misses).
Flat instructions but more last-level misses at the larger size say that a
seen test's time grows with memory, not with work. ``--lua FILE``: another
_seen.lua in place of the checkout's (to count a variant).

Results: bench/results/seen_instructions.json.
"""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path
from typing import Any

import frontier_profile
import numpy as np
from benchlib import result_record, write_result
from frontier_profile import RESULTS, CallgrindRedis

from crawlproject.frontier.store.keys import CrawlKeys
from crawlproject.frontier.store.seen_set import SeenFilter
from crawlproject.lua import SHARD_PRELUDE, load_script
from testkit.seen_table import SEEN_DRIVER, load_exact

BATCH = 500
BATCHES = 8


def driver(lua_file: str | None) -> str:
    if not lua_file:
        return SEEN_DRIVER
    ours = load_script("crawlproject.frontier.store", "_seen", SHARD_PRELUDE)
    seen = (Path(__file__).parents[1] / "crawlproject/frontier/store/lua/_seen.lua").read_text()
    assert seen in ours, "the driver no longer embeds _seen.lua verbatim"
    return SEEN_DRIVER.replace(seen, Path(lua_file).read_text())


def measure(n: int, cache_sim: bool, lua: str, workdir: Path) -> dict[str, Any]:
    if cache_sim:  # the same server, with callgrind's cache simulation on
        popen = subprocess.Popen

        def with_cache(args: list[str], **kw: Any) -> Any:
            return popen([args[0], args[1], "--cache-sim=yes", *args[2:]], **kw)

        frontier_profile.subprocess.Popen = with_cache  # type: ignore[assignment,misc]
    try:
        cg = CallgrindRedis(workdir)
    finally:
        if cache_sim:
            frontier_profile.subprocess.Popen = popen  # type: ignore[misc]
    try:
        keys = CrawlKeys("bench", 1)
        rng = np.random.default_rng(1)
        fps = rng.integers(0, 256, size=(n, 8), dtype=np.uint8)
        load_exact(cg.client, keys, 0, fps)
        spec = SeenFilter().script_arg(keys.shards)
        sha = cg.client.script_load(lua)
        tests = 0
        for i in range(BATCHES):
            seen = fps[rng.integers(0, n, BATCH // 2)]
            new = rng.integers(0, 256, size=(BATCH // 2, 8), dtype=np.uint8)
            batch = [bytes(x) + b"0@" for x in np.concatenate([seen, new])]
            rng.shuffle(batch)  # type: ignore[arg-type]
            argv: list[str | bytes] = [keys.shard_prefixes[0], spec, *batch]
            if i == 0:
                cg.client.evalsha(sha, 1, keys.ready(0), *argv)
                continue
            cg.start()
            cg.client.evalsha(sha, 1, keys.ready(0), *argv)
            cg.stop("add")
            tests += len(batch)
        events: list[str] = []
        totals: list[int] = []
        for path in cg.dir.glob("cg.out.*"):
            lines = path.read_text(errors="replace").splitlines()
            if not any(ln.startswith("desc: Trigger:") and "add" in ln for ln in lines):
                continue
            events = next(ln for ln in lines if ln.startswith("events:")).split()[1:]
            row = [int(x) for x in next(ln for ln in lines if ln.startswith("totals:")).split()[1:]]
            totals = row if not totals else [a + b for a, b in zip(totals, row, strict=True)]
        return {
            "urls": n,
            "per_test": {e: round(t / tests, 1) for e, t in zip(events, totals, strict=True)},
        }
    finally:
        cg.stop_server()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sizes", default="1000000,16000000", help="fingerprints loaded, one shard")
    p.add_argument("--cache-sim", action="store_true", help="also simulate the CPU caches")
    p.add_argument("--lua", help="a _seen.lua to count instead of the checkout's")
    a = p.parse_args()
    lua = driver(a.lua)
    rows = []
    for n in (int(x) for x in a.sizes.split(",")):
        row = measure(n, a.cache_sim, lua, RESULTS / "callgrind")
        print(f"{n:,} URLs: per seen test {row['per_test']}", flush=True)
        rows.append(row)
    out = result_record("seen_instructions", batch=BATCH, results=rows)
    print(f"wrote {write_result('seen_instructions.json', out)}")


if __name__ == "__main__":
    main()
