"""Redis instructions per duplicate-index call (dedupe.lua), under callgrind.

    .venv/bin/python bench/dedupe_instructions.py                  # growing, 200,000 pages
    .venv/bin/python bench/dedupe_instructions.py --layout fixed --pages 2000000 \\
        --revs 8fcbdc4,dcf59d4

A redis-server runs under valgrind's callgrind, instrumented only while the
calls run: the index (k = 3) is loaded with ``--pages`` random pages as the
script leaves them (testkit/dedupe_table.py), then ``--calls`` single calls
are counted, half new random pages, half near copies (1-3 flipped bits) of
loaded ones. Instructions do not move with the machine's load, so two
revisions of the script compare on a shared machine: ``--revs`` takes each
one's dedupe.lua (``git show``; HEAD is the working tree's), and a script from
before the growing layout gets its own arguments (an ``order`` letter and the
key of each block string) on the fixed layout. Results:
bench/results/dedupe_instructions.json.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import redis
from benchlib import ensure_valgrind, result_record, write_result
from redis.asyncio import Redis as AsyncRedis

from crawlproject.dedupe.index import DedupeIndex
from crawlproject.dedupe.layout import split_blocks
from crawlproject.frontier.store.keys import CrawlKeys
from crawlproject.lua import used_parts
from testkit.dedupe_table import Layout, resp_for_pages
from testkit.processes import free_port

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = "crawlproject/dedupe/lua/dedupe.lua"
PRELUDE = "crawlproject/dedupe/lua/_prelude.lua"
KEYS = CrawlKeys("bench", 1)


def file_at(rev: str, path: str) -> str | None:
    """``path`` at ``rev`` (HEAD: the working tree's), None if it has none."""
    if rev == "HEAD":
        return (ROOT / path).read_text() if (ROOT / path).exists() else None
    done = subprocess.run(
        ["git", "show", f"{rev}:{path}"], cwd=ROOT, capture_output=True, text=True
    )
    return done.stdout if done.returncode == 0 else None


def script_of(rev: str) -> str:
    """dedupe.lua at ``rev``, after what it uses of its prelude (the Hamming
    distance, a bucket's split: lua/_prelude.lua) if the revision has one, as index.py loads it."""
    script = file_at(rev, SCRIPT)
    if script is None:
        raise SystemExit(f"{rev} has no {SCRIPT}")
    prelude = file_at(rev, PRELUDE)
    return script if prelude is None else used_parts(prelude, script) + "\n" + script


def old_arguments(digest: bytes, simhash: int, url: str) -> list[Any]:
    """ARGV of a dedupe.lua from before the growing layout (fixed buckets only)."""
    blocks = split_blocks(3 + 1)  # the fixed layout's k + 1 blocks
    order = "".join("b" if 64 - b.shift - b.bits / 2 < 32 else "f" for b in blocks)
    keys = [KEYS.dedupe_near(i, b.value(simhash)) for i, b in enumerate(blocks)]
    head = [KEYS.dedupe_prefix, 3, 1, "h", url, digest[:10], simhash.to_bytes(8, "big"), order, 2]
    return head + keys


def count(source: str, growing: bool, pages: int, calls: int, workdir: Path) -> int:
    """Instructions per call of ``source`` on an index of ``pages`` pages."""
    port = free_port()
    proc = subprocess.Popen(
        [
            "valgrind", "--tool=callgrind", "--instr-atstart=no",
            f"--callgrind-out-file={workdir}/cg.out.%p",
            "redis-server", "--port", str(port), "--save", "", "--appendonly", "no",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    client = redis.Redis(port=port, socket_timeout=900)
    try:
        for _ in range(600):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.2)
        rng = np.random.default_rng(1)
        digests = rng.integers(0, 256, size=(pages, 10), dtype=np.uint8)
        sims = np.frombuffer(rng.bytes(8 * pages), dtype=">u8").astype(np.uint64)
        layout = Layout(k=3, n=pages, growing=growing)
        with socket.create_connection(("127.0.0.1", port)) as sock:
            data = resp_for_pages(KEYS, layout, digests, sims)
            sock.sendall(b"CLIENT REPLY OFF\r\n" + data + b"CLIENT REPLY ON\r\n")
            sock.settimeout(900)
            assert sock.recv(64) == b"+OK\r\n"
        client.hset(KEYS.dedupe_config, mapping=layout.config())
        index = DedupeIndex(AsyncRedis(port=port), KEYS, blocks=layout.blocks)
        old = "'nmin'" not in source  # from before the growing layout
        if old and growing:
            raise SystemExit("a script from before the growing layout reads --layout fixed only")
        if not growing and "created with fixed buckets" in source:
            raise SystemExit("this script refuses the fixed buckets (issue 42): --layout growing")
        plan_rng = random.Random(2)
        args = []
        for _ in range(calls // 2 + 25):
            for digest, simhash in (
                (plan_rng.randbytes(20), plan_rng.getrandbits(64)),
                (plan_rng.randbytes(20), near_copy(int(sims[plan_rng.randrange(pages)]), plan_rng)),
            ):
                url = "u" * 60
                args.append(
                    old_arguments(digest, simhash, url)
                    if old
                    else index.script_args(digest, simhash, url, "h")
                )
        script = client.register_script(source)
        for a in args[:50]:  # warm: the script cached, the connection set up
            script(keys=[KEYS.dedupe_config], args=a)
        control = ["callgrind_control", "-i", "on", str(proc.pid)]
        subprocess.run(control, check=True, capture_output=True)
        for a in args[50:]:
            script(keys=[KEYS.dedupe_config], args=a)
        control[1:3] = ["-i", "off"]
        subprocess.run(control, check=True, capture_output=True)
        control[1:3] = ["-d", "calls"]
        subprocess.run(control, check=True, capture_output=True)
        total = 0
        for path in workdir.glob("cg.out.*"):
            text = path.read_text(errors="replace").splitlines()
            trigger = next((ln for ln in text if ln.startswith("desc: Trigger:")), "")
            totals = next((ln for ln in text if ln.startswith("totals:")), "")
            if trigger.endswith("calls") and totals:
                total += int(totals.split()[1])
        return total // len(args[50:])
    finally:
        with contextlib.suppress(redis.RedisError):  # it closes the connection
            client.shutdown(nosave=True)
        proc.wait(timeout=900)


def near_copy(simhash: int, rng: random.Random) -> int:
    for bit in rng.sample(range(64), rng.randint(1, 3)):
        simhash ^= 1 << bit
    return simhash


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--layout", choices=("growing", "fixed"), default="growing")
    p.add_argument("--pages", type=int, default=200_000)
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--revs", default="HEAD", help="revisions of dedupe.lua, comma-separated")
    a = p.parse_args()
    ensure_valgrind()
    rows = []
    for rev in a.revs.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            n = count(script_of(rev), a.layout == "growing", a.pages, a.calls, Path(tmp))
        rows.append({"rev": rev, "instructions_per_call": n})
        print(
            f"{rev:12} {a.layout} layout, {a.pages:,} pages: {n:,} instructions a call", flush=True
        )
    result = result_record(
        "dedupe_instructions",
        config={"layout": a.layout, "pages": a.pages, "calls": a.calls},
        rows=rows,
    )
    print(f"wrote {write_result('dedupe_instructions.json', result)}")


if __name__ == "__main__":
    main()
