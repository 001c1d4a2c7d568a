"""What one step of a frontier script costs Redis, in instructions (callgrind).

    .venv/bin/python bench/lua_costs.py [--n 2000]

Each case is a loop of ``--n`` iterations inside one EVAL on a redis-server
under valgrind's callgrind (bench/frontier_profile.py's CallgrindRedis),
instrumented only while it runs (after a warm-up run): the figure is Redis's
instructions per iteration, the same at any load. ``empty`` is the loop
alone; the others add one step each, so their difference from ``empty`` is
that step's cost. The data: a hash of 1,024 fields of 300 bytes (the old
exact seen set's buckets), 2,048 sets of 200 integers below 2^53 (intsets:
the exact seen set's buckets now), a 256 KiB string; for the credit cases a hash
of 64 integer fields and sorted sets of 64 and 264 8-byte fingerprints with
integer scores, as AOPIC's `q:<host>` (Redis keeps the first two as
listpacks, the third as a dict and a skiplist).

What the frontier's scripts were written by (docs/frontier.md, "Redis CPU
per page"): a command run from Lua costs thousands of instructions; so does
every string a script makes (its hash, its allocation, the collector's work
later), a long one more; a number formatted ``%d`` about as much as a short
command; a Lua function call a few hundred.

Results: bench/results/lua_costs.json.
"""

from __future__ import annotations

import argparse
import os
import random

import frontier_profile
from benchlib import result_record, write_result
from frontier_profile import RESULTS, CallgrindRedis

# name (letters, digits, _: callgrind names its dumps by it) -> loop body (``i``: the
# iteration; ``n`` accumulates so nothing is optimised away)
CASES: dict[str, str] = {
    "empty": "n = n + i",
    "lua_function_call": "n = f(n)",
    "format_d_4_digits": "n = n + #string.format('%d', i)",
    "format_d_16_digits": "n = n + #string.format('%d', 4503599627370496 + i * 7919)",
    "sub_6_of_300_bytes": "n = n + #string.sub(v300, 3, 8)",
    "concat_300_and_6_bytes": "n = n + #(v300 .. 'abcdef')",
    "find_6_in_300_bytes": "n = n + (string.find(v300, 'abcdef', 1, true) or 0)",
    "EXISTS": "n = n + redis.call('EXISTS', 's:17')",
    "HGET_300_byte_value": "n = n + #redis.call('HGET', 'h', '17')",
    "HMGET_per_field_of_20": (
        "if i % 20 == 0 then n = n + #redis.call('HMGET', 'h', unpack(f20)) end"
    ),
    "HSET_300_byte_value": "n = n + redis.call('HSET', 'h', '17', v300)",
    "GETRANGE_256_bytes": "n = n + #redis.call('GETRANGE', 'seg', '1024', '1279')",
    "SETRANGE_6_bytes": "n = n + redis.call('SETRANGE', 'seg', '1024', 'abcdef')",
    "SISMEMBER_intset_of_200": "n = n + redis.call('SISMEMBER', 's:17', '4503599627370496')",
    # Where a URL's AOPIC credit could live, updated by a link to it (a
    # member present): beside it in the seen set's intset (SADD only tests),
    # in a small hash or sorted set (listpacks: found by a linear scan), in a
    # large sorted set (a dict and a skiplist).
    "SADD_intset_of_200_present": "n = n + redis.call('SADD', 's:18', '4503599627370497')",
    "HINCRBY_hash_of_64_integers": "n = n + redis.call('HINCRBY', 'hc', '4503599627370497', 2)",
    "ZADD_XX_INCR_zset_of_64": "n = n + #redis.call('ZADD', 'zc', 'XX', 'INCR', 2, fp)",
    "ZADD_XX_INCR_zset_of_264": "n = n + #redis.call('ZADD', 'zs', 'XX', 'INCR', 2, fp)",
    "SADD_new_key_and_member_formatted": (
        "n = n + redis.call('SADD', string.format('s:%d', (i * 7) % 2048),"
        " string.format('%d', (i * 104729 * 7919) % 9007199254740991))"
    ),
}
PROLOGUE = (
    "local n = 0 local v300 = string.rep('x', 300) local function f(a) return a + 1 end "
    "local f20 = {} for j = 1, 20 do f20[j] = tostring(j) end "
    "local fp = struct.pack('>I8', 4503599627370497) "
)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--n", type=int, default=2000, help="iterations per case")
    a = p.parse_args()
    cg = CallgrindRedis(RESULTS / "callgrind")
    c = cg.client
    rng = random.Random(18)
    c.hset("h", mapping={str(i): os.urandom(300) for i in range(1024)})
    pipe = c.pipeline(transaction=False)
    for b in range(2048):
        pipe.sadd(f"s:{b}", *[rng.getrandbits(53) for _ in range(200)])
    pipe.execute()
    probe = 4503599627370497  # the member the credit cases update
    c.sadd("s:18", probe)
    others = [rng.getrandbits(52) for _ in range(263)]
    # The probe in the middle of the hash's listpack (a scan finds it half way).
    fields = [*others[:32], probe, *others[32:63]]
    c.hset("hc", mapping={str(m): 2 * rng.getrandbits(30) for m in fields})
    # The sorted sets as AOPIC's `q:<host>`: 8-byte fingerprints, integer scores.
    fps = [m.to_bytes(8, "big") for m in [probe, *others]]
    c.zadd("zc", {fp: rng.getrandbits(30) for fp in fps[:64]})
    c.zadd("zs", {fp: rng.getrandbits(30) for fp in fps})
    c.set("seg", os.urandom(1 << 18))
    frontier_profile.PHASES = tuple(CASES)  # the dumps CallgrindRedis counts
    for name, body in CASES.items():
        sha = c.script_load(f"{PROLOGUE} for i = 1, {a.n} do {body} end return n")
        c.evalsha(sha, 0)  # warm: the script compiled, the data touched
        cg.start()
        c.evalsha(sha, 0)
        cg.stop(name)
    counts = cg.instructions()
    cg.stop_server()
    per = {name: round(counts[name] / a.n) for name in CASES}
    base = per["empty"]
    print(f"Redis instructions per iteration (loop alone: {base:,})")
    for name, v in per.items():
        if name != "empty":
            print(f"  {name:<40} {v - base:>7,}")
    steps = {k: v - base for k, v in per.items() if k != "empty"}
    record = result_record("lua_costs", iterations=a.n, loop_alone=base, per_step=steps)
    write_result("lua_costs.json", record)


if __name__ == "__main__":
    main()
