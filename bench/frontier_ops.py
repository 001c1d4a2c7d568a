"""Frontier throughput without HTTP: pages/s through the real Lua scripts.

    .venv/bin/python bench/frontier_ops.py [--duration 20] [--max-pages 100000]
        [--redis single,cluster]

A driver simulates a worker at Redis level: claim a batch on every shard, release
the pages' host slots, add 20 links per page (about half already seen) in one
``add`` call, ack the pages in one call. Host delay 0, one slot per host, so
politeness never holds the rate back. Each scenario starts from an empty Redis
(FLUSHALL) seeded with ``--hosts`` hosts, and runs with 1 and with 2 driver
processes (own event loop each) against the same private redis-server.

Two modes, because a Python driver that builds every link for real cannot feed
one Redis fast enough to test it:

* ``frontier``: link payloads are made by string templates (checked byte for byte
  against the real code path at startup), claimed pages are not decoded. This
  measures the frontier's own cost: Redis CPU plus round trips.
* ``worker``: the whole worker-side path per link (Request, canonicalize,
  fingerprint, RequestCodec.encode) and per page (decode). Python-bound; shows
  what one worker process can push.

Systems: ``ours`` (the default depth policy: each link scored by its depth,
1-5, a hash of the link (benchlib.url_depth), so a host's URLs come at every
depth and fill several band lists),
``ours-aopic`` (CRAWL_PRIORITY_POLICY=aopic: claims return the page's credit
share, each link brings share / links; repeated links credit queued URLs),
``scrapy-redis``. ``--systems ours,ours-aopic --modes frontier`` compares the
two policies (target: AOPIC within 20 % of depth).

Baseline, same run and same Redis: scrapy-redis 0.9.1 as its Scheduler drives it
(sync client, pickle): ``PriorityQueue.pop`` per page; per link
``RFPDupeFilter.request_seen`` then ``PriorityQueue.push`` if new. In ``frontier``
mode the same Redis commands are sent with the fingerprint/pickle precomputed.
scrapy-redis has no politeness, no leases and no acks: it does less per page.

``--revs BASE,REV`` compares revisions in one run: every scenario runs on each
revision's export (bench/crawl_rate.py's export_code; the drivers and the
seeding import the project from it), ``--repeats`` rounds in alternating order
(A B, B A, ...), and gives each revision's median and its ratio to the first:

    .venv/bin/python bench/frontier_ops.py --systems ours --modes frontier --procs 1 \
        --revs 1cb6f38,5e394c7 --repeats 4

Without ``--revs``, ``--repeats N`` runs the systems in N alternating rounds
(A B, then B A, ...: the machine's drift over the minutes falls on both
alike) and gives each system's median and the AOPIC ÷ depth ratio per round
and of the medians (``system_medians``):

    .venv/bin/python bench/frontier_ops.py --systems ours,ours-aopic --modes frontier \
        --procs 1 --duration 15 --redis single --repeats 3

``--redis single,cluster`` runs every scenario on one redis-server and then on a
real Redis Cluster of 3 masters (Debian's redis-server, ``redis-cli --cluster
create``; REDIS_URL ``redis+cluster://``, the client the workers use), and gives
each cluster row's ratio to the same scenario on one Redis. Redis CPU is summed
over the masters. scrapy-redis is left out on the cluster (its keys carry no
hash tags and its dupefilter and queue are one key each).

``--redis cluster --masters 1,2,3,4`` runs them on a cluster of each size
instead (bench/cluster_masters.py: 16384 / N contiguous slots per master, no
replicas): per row ``masters``, each master's Redis CPU per page
(``redis_cpu_us_per_page_per_master``) and the busiest master's share of the
Redis CPU (``busiest_master_share``; 1 / N would be an even spread):

    flock /tmp/crawlproject-bench.lock .venv/bin/python bench/frontier_ops.py \
        --systems ours --modes frontier --procs 1 --redis cluster --masters 1,2,3,4

``--shards N`` (default: a new crawl's, crawlproject/frontier/store/crawl_layout.py) sets the
crawl's shard count. Every row has ``redis_scripts_per_page`` (script runs, the
calls a client makes) and ``redis_commands_per_page`` (every command, those
inside scripts too), over every master, beside its Redis CPU per page. The drivers ask the
shards a worker's claim loop would (crawlproject/frontier/claims/claims.py ClaimClock:
a shard whose claim found nothing claimable is skipped until a slot there is
freed, or its probe comes).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import hashlib
import inspect
import json
import multiprocessing as mp
import os
import pickle
import platform
import random
import statistics
import struct
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any, TypeVar, cast

import redis
import scrapy_redis
from benchlib import (
    PROBE_DEPTH,
    PROBE_SCOPE,
    PROBE_URL,
    ClusterServer,
    RedisServer,
    fill_probe,
    result_record,
    url_depth,
    write_result,
)
from cluster_masters import MastersCluster
from redis.asyncio import Redis as AsyncRedis
from scrapy import Request, Spider
from scrapy.settings import Settings
from scrapy_redis.connection import get_redis_from_settings
from scrapy_redis.dupefilter import RFPDupeFilter
from scrapy_redis.queue import PriorityQueue

# --revs: a driver (and seeding) process imports the project from its revision's
# export, which its parent names here, ahead of the repository benchlib put first.
REV_CODE_ENV = "FRONTIER_OPS_CODE"
if os.environ.get(REV_CODE_ENV):
    sys.path.insert(0, os.environ[REV_CODE_ENV])

import crawlproject  # noqa: E402
from crawlproject import default_settings as ds  # noqa: E402
from crawlproject.frontier.admission.priority import DepthPriority  # noqa: E402
from crawlproject.frontier.basics.urls import UrlCanonicalizer, host_key  # noqa: E402
from crawlproject.frontier.connection.redis_client import redis_client  # noqa: E402
from crawlproject.frontier.store.codec import RequestCodec  # noqa: E402
from crawlproject.frontier.store.keys import CrawlKeys  # noqa: E402
from crawlproject.frontier.store.redis_frontier import NewEntry, RedisFrontier, Release  # noqa: E402

try:  # the compact form's queue form (revisions before it have none: --revs)
    from crawlproject.frontier.store.codec import stored_form
except ImportError:
    stored_form = None  # type: ignore[assignment]

try:  # which shards a claim asks (revisions before it ask them all: --revs)
    from crawlproject.frontier.claims.claim_clock import ClaimClock
except ImportError:
    ClaimClock = None  # type: ignore[assignment,misc]
try:  # a new crawl's shard count (before it: CRAWL_FRONTIER_SHARDS' default)
    from crawlproject.frontier.store.crawl_layout import NEW_CRAWL_SHARDS
except ImportError:
    NEW_CRAWL_SHARDS = 4

RESULTS = Path(__file__).resolve().parent / "results"


def stored(data: bytes, pkey: str) -> bytes:
    """A request in its host queue's form, made when the link is (as a worker
    could at admission), so that the driver's add() has nothing left to strip;
    revisions before the compact form (--revs) store it whole."""
    return stored_form(data, pkey) if stored_form is not None else data


CRAWL = "bench"
TARGET_PAGES_S = 6200  # the target for one Redis
SEED_CHUNK = 100_000  # seeds per RedisFrontier.add call
BARRIER_SECONDS = 600  # the drivers' set-up (link pools) before a run starts
T = TypeVar("T")
Server = RedisServer | ClusterServer | MastersCluster
IDLE_POLL = 0.5  # CRAWL_IDLE_POLL_SECONDS' default: the claim clock's probe period


@dataclass(frozen=True)
class Config:
    hosts: int
    seeds_per_host: int
    claim_n: int
    links: int
    seen_fraction: float
    duration: float
    max_pages: int
    shards: int
    url: str = ""
    seen_capacity: int = 0  # > 0: a Bloom seen set of that capacity (bench/frontier_growth.py)


class UrlSpace:
    """URL ``k`` of namespace ``ns`` is a pure function of k: an "already seen"
    link is just an earlier k, so no process keeps a list of its URLs."""

    def __init__(self, hosts: int, ns: int) -> None:
        self.hosts = hosts
        self.ns = ns

    def host(self, k: int) -> str:
        i = (k * 2654435761 + self.ns * 7919) % self.hosts  # spreads k over hosts
        return f"127.0.{i // 250}.{i % 250 + 1}:8080"

    def url(self, k: int, host: str) -> str:  # 66-68 characters
        return f"http://{host}/archive/n{self.ns}/section-{k % 97:02d}/article-{k:09d}.html"


class BenchSpider(Spider):
    name = "bench"


class Links:
    """Link payloads for both systems, real (``worker``) or templated (``frontier``)."""

    def __init__(self, space: UrlSpace, real: bool) -> None:
        self.space = space
        self.real = real
        self.canon = UrlCanonicalizer(ds.CRAWL_SESSION_PARAMS)
        self.codec = RequestCodec(ds.CRAWL_REQUEST_CLASSES)
        self.spider = BenchSpider()
        self._their_dict = Request("http://x/").to_dict(spider=self.spider)
        # The codec's own output for a probe request: key order etc. follow the codec.
        probe = Request(PROBE_URL, meta={"depth": PROBE_DEPTH, "crawl_scope": PROBE_SCOPE})
        self._template = self.codec.encode(probe, None).decode()

    def request(self, k: int) -> Request:
        host = self.space.host(k)
        return Request(self.space.url(k, host), meta={"depth": url_depth(k), "crawl_scope": host})

    def ours(self, k: int) -> NewEntry:
        if self.real:  # what FrontierScheduler.enqueue_request does
            req = self.request(k)
            canonical = self.canon.canonicalize(req.url)
            fp = self.canon.fingerprint(canonical, req.method, req.body)
            pkey = host_key(canonical)
            return NewEntry(
                pkey, fp, req.dont_filter, stored(self.codec.encode(req, None), pkey),
                score=DepthPriority().value(req),
            )  # fmt: skip
        host = self.space.host(k)
        url = self.space.url(k, host)  # already canonical (checked in verify)
        pkey = host_key(url)
        data = stored(fill_probe(self._template, url, url_depth(k), host), pkey)
        fp = self.canon.fingerprint(url)
        return NewEntry(pkey, fp, False, data, score=float(url_depth(k)))

    def theirs(self, k: int) -> tuple[str, bytes]:
        """(RFPDupeFilter.request_fingerprint, PriorityQueue._encode_request) of link k."""
        host = self.space.host(k)
        url = self.space.url(k, host)
        fp_json = json.dumps({"method": "GET", "url": url, "body": ""}, sort_keys=True)
        d = dict(self._their_dict, url=url, meta={"depth": url_depth(k), "crawl_scope": host})
        return hashlib.sha1(fp_json.encode()).hexdigest(), pickle.dumps(d, protocol=-1)

    def verify(self, n: int = 300) -> None:
        """The templates must give exactly the bytes of the real code path."""
        real = Links(self.space, True)
        df = RFPDupeFilter(None, "k")
        q = PriorityQueue(server=None, spider=self.spider, key="k")
        for k in random.Random(1).sample(range(10**8), n):
            req = real.request(k)
            assert real.canon.canonicalize(req.url) == req.url, req.url
            assert real.ours(k) == self.ours(k), k
            assert self.theirs(k) == (df.request_fingerprint(req), q._encode_request(req)), k


class Picker:
    """Next link id: an earlier one (already seen) with probability seen_fraction."""

    def __init__(self, seen_fraction: float, seed: int) -> None:
        self.rng = random.Random(seed)
        self.seen_fraction = seen_fraction
        self.next_new = 0

    def __call__(self) -> int:
        if self.next_new and self.rng.random() < self.seen_fraction:
            return self.rng.randrange(self.next_new)
        self.next_new += 1
        return self.next_new - 1


DOUBLE = struct.Struct(">d")


class SharedLink:
    """A pooled link with its page's credit share (AOPIC, frontier mode): what
    RedisFrontier.add reads of a NewEntry (``pkey``, ``packed()``), without a
    frozen NewEntry built per link. That costs ~2.5 µs a link, 50 µs of driver
    time per page, which depth order never pays here (its links come from the
    pool as they are; a worker builds one per link in either order), so the
    pages/s ratio charged it to AOPIC. ``packed()`` is the pooled entry's own
    with the number put in: no cheaper than a depth link's."""

    __slots__ = ("_entry", "_score", "pkey")
    # Where packed() puts the 8-byte number in the sample (number_at), set per
    # driver, and the sample's seen-member length (byte 11 of an entry since
    # the worker writes the member; -1 for a revision from before): the number
    # follows the member, so it moves with the member's length.
    at = -1
    member_len = -1

    def __init__(self, entry: NewEntry, score: float) -> None:
        self.pkey = entry.pkey
        self._entry = entry
        self._score = score

    def packed(self) -> bytes:
        p, at = self._entry.packed(), self.at
        if self.member_len >= 0:
            at += p[10] - self.member_len
        return p[:at] + DOUBLE.pack(self._score) + p[at + 8 :]


def member_len(sample: NewEntry) -> int:
    """The length of the seen-set member packed() writes after the kind and
    options (its byte 11), or -1 for a revision that writes none (--revs)."""
    p = sample.packed()
    digits = b"%d" % (int.from_bytes(sample.fingerprint, "little") >> 11)
    return len(digits) if p[10] == len(digits) and p[11 : 11 + len(digits)] == digits else -1


def number_at(sample: NewEntry) -> int | None:
    """Where packed() puts an entry's number, an 8-byte big-endian double (None:
    this revision packs it otherwise, --revs)."""
    one, two = replace(sample, score=1.0).packed(), replace(sample, score=2.0).packed()
    at = next((i for i, (x, y) in enumerate(zip(one, two, strict=False)) if x != y), None)
    if at is None or len(one) != len(two):
        return None
    ok = one[at : at + 8] == DOUBLE.pack(1.0) and two[at : at + 8] == DOUBLE.pack(2.0)
    return at if ok else None


def pooled(make: Callable[[int], T], n: int) -> Callable[[int], T]:
    """Payloads of link ids below n made before the clock starts (frontier mode), so
    the driver spends its CPU on frontier calls; later ids are made on demand."""
    pool = [make(k) for k in range(n)]
    gc.collect()
    gc.freeze()  # a worker has no such pool: keep the GC from scanning it
    return lambda k: pool[k] if k < len(pool) else make(k)


def pool_size(cfg: Config, real: bool) -> int:
    return 0 if real else int(cfg.max_pages * cfg.links * (1 - cfg.seen_fraction) * 1.02) + 1000


# -- drivers (one per process) -------------------------------------------------------


POLICY_MODES = {"ours": "score", "ours-aopic": "credit"}  # system -> frontier priority mode


def _frontier(r: AsyncRedis, cfg: Config, system: str = "ours") -> RedisFrontier:
    # CRAWL_HOST_DELAY=0 -> default_delay_ms=0; one slot per host. A revision
    # from before the growing seen set (--revs) takes its seen bucket bits first.
    old = "seen_bucket_bits" in inspect.signature(RedisFrontier).parameters
    options: dict[str, Any] = {"priority_mode": POLICY_MODES[system]}
    if cfg.seen_capacity:
        from crawlproject.frontier.store.seen_set import SeenFilter

        options["seen"] = SeenFilter("bloom", cfg.seen_capacity)
    args: list[Any] = [r, CrawlKeys(CRAWL, cfg.shards), *([12] if old else []), 0, 1, 30_000]
    return RedisFrontier(*args, **options)


async def drive_ours(
    cfg: Config, ns: int, real: bool, barrier: Barrier, system: str = "ours"
) -> dict[str, Any]:
    """``ours``: the depth policy (each link's score is its depth); ``ours-aopic``:
    AOPIC (each link gets its page's credit share / links)."""
    links, pick = Links(UrlSpace(cfg.hosts, ns), real), Picker(cfg.seen_fraction, ns)
    entry = pooled(links.ours, pool_size(cfg, real))
    shared_at = number_at(links.ours(0))
    if shared_at is not None:  # the same bytes as a NewEntry of that number
        SharedLink.at, SharedLink.member_len = shared_at, member_len(links.ours(0))
        for probe in map(links.ours, range(1, 200)):  # members of every length seen
            assert SharedLink(probe, 0.37).packed() == replace(probe, score=0.37).packed()
    r = redis_client(cfg.url)  # one server or the cluster, as a worker connects
    f = _frontier(r, cfg, system)
    await f.prepare()
    worker = f"bench-{ns}"
    ops: dict[str, float] = defaultdict(float)
    pages = n_links = hits = empty = 0
    loop = asyncio.get_running_loop()
    clock = ClaimClock(IDLE_POLL) if hasattr(ClaimClock, "to_ask") else None
    barrier.wait()
    t0, cpu0 = time.monotonic(), time.process_time()
    deadline, limit = t0 + cfg.duration, cfg.max_pages
    while pages < limit and time.monotonic() < deadline:
        a = time.perf_counter()
        items: list[tuple[Any, bytes]] = []
        shares: list[float | None] = []
        # The shards a worker's claim loop would ask (claims.py), each at most
        # claim_n; a revision from before the clock (--revs) asks them all.
        asked = range(cfg.shards) if clock is None else clock.to_ask(cfg.shards, loop.time())[0]
        for shard in asked:
            batch = await f.claim(shard, cfg.claim_n, worker)
            items += batch.items
            shares += batch.shares or [None] * len(batch.items)
            if clock is not None:
                now, ready = loop.time(), batch.next_ready_ms
                due = None if ready is None else now + max(0, ready - batch.now_ms) / 1000
                clock.claimed(shard, due, now)
        if clock is not None:
            clock.next_shard = (clock.next_shard + 1) % cfg.shards
        if not items:
            empty += 1
            await asyncio.sleep(0.001)
            continue
        leases = [lease for lease, _ in items]
        b = time.perf_counter()
        await f.release([Release(lease, 0) for lease in leases])  # as a worker does at once
        c = time.perf_counter()
        if real:  # the scheduler decodes each claimed request
            for _, data in items:
                links.codec.decode(data, None)
        # Each link's number: depth, its depth (pooled); AOPIC, its page's share / links.
        if any(share is not None for share in shares):
            if shared_at is None or real:
                entries = [
                    NewEntry(e.pkey, e.fingerprint, e.dont_filter, e.data, (s or 0.0) / cfg.links)
                    for s in shares
                    for e in (entry(pick()) for _ in range(cfg.links))
                ]
            else:  # add() reads pkey and packed() only
                entries = cast(
                    list[NewEntry],
                    [
                        SharedLink(entry(pick()), (s or 0.0) / cfg.links)
                        for s in shares
                        for _ in range(cfg.links)
                    ],
                )
        else:
            entries = [entry(pick()) for _ in range(cfg.links * len(items))]
        d = time.perf_counter()
        hits += (await f.add(entries)).seen_hits
        e = time.perf_counter()
        await f.ack(leases)
        if clock is not None:  # each acked lease freed its host's slot
            for shard in {lease.shard for lease in leases}:
                clock.slot_freed(shard, loop.time())
        g = time.perf_counter()
        for name, dt in (
            ("claim", b - a),
            ("release", c - b),
            ("make links" + (" + decode" if real else ""), d - c),
            ("add", e - d),
            ("ack", g - e),
        ):
            ops[name] += dt
        pages += len(items)
        n_links += len(entries)
    t1, cpu1 = time.monotonic(), time.process_time()
    await r.aclose()
    return {
        "pages": pages,
        "links": n_links,
        "seen_hits": hits,
        "t0": t0,
        "t1": t1,
        "cpu": cpu1 - cpu0,
        "empty_claims": empty,
        "ops": dict(ops),
    }


def drive_theirs(cfg: Config, ns: int, real: bool, barrier: Barrier) -> dict[str, Any]:
    links, pick = Links(UrlSpace(cfg.hosts, ns), real), Picker(cfg.seen_fraction, ns)
    entry = pooled(links.theirs, pool_size(cfg, real))
    server = get_redis_from_settings(Settings({"REDIS_URL": cfg.url}))  # its own client
    queue = PriorityQueue(server=server, spider=links.spider, key="%(spider)s:requests")
    df = RFPDupeFilter(server, key="bench:dupefilter", debug=False)
    pages = n_links = hits = empty = 0
    barrier.wait()
    t0, cpu0 = time.monotonic(), time.process_time()
    deadline, limit = t0 + cfg.duration, cfg.max_pages
    while pages < limit and time.monotonic() < deadline:
        if real:  # Scheduler.next_request -> queue.pop (decodes)
            got = queue.pop() is not None
        else:  # PriorityQueue.pop's commands, without decoding
            pipe = server.pipeline()
            pipe.multi()
            pipe.zrange(queue.key, 0, 0).zremrangebyrank(queue.key, 0, 0)
            got = bool(pipe.execute()[0])
        if not got:
            empty += 1
            continue
        pages += 1
        for _ in range(cfg.links):  # Scheduler.enqueue_request, one link at a time
            k = pick()
            if real:
                req = links.request(k)
                if df.request_seen(req):
                    hits += 1
                else:
                    queue.push(req)
            else:
                fp, data = entry(k)
                if server.sadd(df.key, fp) == 0:
                    hits += 1
                else:
                    server.execute_command("ZADD", queue.key, 0, data)
            n_links += 1
    t1, cpu1 = time.monotonic(), time.process_time()
    server.close()
    return {
        "pages": pages,
        "links": n_links,
        "seen_hits": hits,
        "t0": t0,
        "t1": t1,
        "cpu": cpu1 - cpu0,
        "empty_claims": empty,
        "ops": {},
    }


def driver(system: str, mode: str, cfg: Config, ns: int, barrier: Barrier, out: Any) -> None:
    real = mode == "worker"
    if os.environ.get(REV_CODE_ENV) and not real:
        Links(UrlSpace(cfg.hosts, 1), False).verify()  # templates = this revision's bytes
    if system in POLICY_MODES:
        res = asyncio.run(drive_ours(cfg, ns, real, barrier, system))
    else:
        res = drive_theirs(cfg, ns, real, barrier)
    out.put({**res, "code": str(Path(crawlproject.__file__).parents[1])})


@contextlib.contextmanager
def rev_code(root: Path | None) -> Iterator[None]:
    """Processes started inside import the project from ``root`` (an export of one
    commit, see --revs); spawn hands a child this process's environment."""
    if root is None:
        yield
        return
    os.environ[REV_CODE_ENV] = str(root)
    try:
        yield
    finally:
        del os.environ[REV_CODE_ENV]


def in_child(target: Callable[..., None], *args: Any) -> None:
    """Runs ``target(*args)`` in a spawned process (one with --revs' code) and waits."""
    proc = mp.get_context("spawn").Process(target=target, args=args)
    proc.start()
    proc.join()
    if proc.exitcode:
        raise RuntimeError(f"{target.__name__} failed in its process (exit {proc.exitcode})")


# -- scenarios -----------------------------------------------------------------------


def seed_ours(system: str, cfg: Config) -> None:
    """Our frontier's seeds, as this process's code (a revision's, with --revs) writes them."""
    links = Links(UrlSpace(cfg.hosts, 0), False)
    ids = range(cfg.hosts * cfg.seeds_per_host)

    async def go() -> None:
        r = redis_client(cfg.url)
        f = _frontier(r, cfg, system)
        await f.prepare()
        seed_score = 1.0 if POLICY_MODES[system] == "credit" else 0.0  # a seed's credit
        for start in range(0, len(ids), SEED_CHUNK):  # 1M hosts: bounded memory per call
            chunk = ids[start : start + SEED_CHUNK]
            await f.add([replace(links.ours(k), score=seed_score) for k in chunk])
        await r.aclose()

    asyncio.run(go())


def seed(server: Server, system: str, cfg: Config, code: Path | None = None) -> None:
    """Empty Redis, then seeds_per_host URLs on each host (namespace 0)."""
    server.flushall()
    links = Links(UrlSpace(cfg.hosts, 0), False)
    ids = range(cfg.hosts * cfg.seeds_per_host)
    if system in POLICY_MODES and code is not None:
        with rev_code(code):
            in_child(seed_ours, system, cfg)
    elif system in POLICY_MODES:
        seed_ours(system, cfg)
    else:
        pipe = server.client.pipeline(transaction=False)
        for k in ids:
            fp, data = links.theirs(k)
            pipe.sadd("bench:dupefilter", fp)
            pipe.zadd("bench:requests", {data: 0})
        pipe.execute()


def scenario(
    server: Server,
    kind: str,
    system: str,
    mode: str,
    procs: int,
    cfg: Config,
    code: Path | None = None,
    ns0: int = 0,
) -> dict[str, Any]:
    """One scenario; ``code``: the export of the revision the drivers run (--revs);
    ``ns0``: the drivers' link namespaces start after it (another run on the same
    seeded Redis finds links of its own, not the last run's, which are seen)."""
    seed(server, system, cfg, code)
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(procs + 1), ctx.Queue()
    per_proc = Config(**{**asdict(cfg), "max_pages": cfg.max_pages // procs})
    workers = [
        ctx.Process(target=driver, args=(system, mode, per_proc, ns, barrier, out))
        for ns in range(ns0 + 1, ns0 + procs + 1)
    ]
    with rev_code(code):
        for w in workers:
            w.start()
    # A driver builds its link pool before the barrier: at load 20 on 2 cores that
    # took over 120 s (2026-12-07), and the run failed with BrokenBarrierError.
    barrier.wait(timeout=BARRIER_SECONDS)
    cmd0, node0 = commands_per_node(server), cpu_per_node(server)
    cpu0, w0 = server.cpu_seconds(), time.monotonic()
    runs = [out.get(timeout=cfg.duration + 300) for _ in workers]
    cpu1, w1 = server.cpu_seconds(), time.monotonic()
    node1, cmd1 = cpu_per_node(server), commands_per_node(server)
    for w in workers:
        w.join()
    if code is not None and any(r["code"] != str(code) for r in runs):
        raise RuntimeError(f"a driver ran {[r['code'] for r in runs]}, not {code}")
    pages, links_n = sum(r["pages"] for r in runs), sum(r["links"] for r in runs)
    elapsed = max(r["t1"] for r in runs) - min(r["t0"] for r in runs)
    ops: dict[str, float] = defaultdict(float)
    for r in runs:
        for k, v in r["ops"].items():
            ops[k] += v
    node_cpu = [b - a for a, b in zip(node0, node1, strict=True)]
    return {
        "redis": kind,
        "masters": len(node_cpu),
        "shards": cfg.shards,
        "system": system,
        "mode": mode,
        "procs": procs,
        "pages": pages,
        "links": links_n,
        "seconds": round(elapsed, 3),
        "pages_per_s": round(pages / elapsed, 1),
        "links_per_s": round(links_n / elapsed, 1),
        "seen_hit_fraction": round(sum(r["seen_hits"] for r in runs) / max(links_n, 1), 3),
        "redis_cpu_cores": round((cpu1 - cpu0) / (w1 - w0), 3),
        "redis_cpu_us_per_page": round((cpu1 - cpu0) / max(pages, 1) * 1e6, 1),
        "redis_cpu_us_per_page_per_master": [round(c / max(pages, 1) * 1e6, 1) for c in node_cpu],
        "busiest_master_share": round(max(node_cpu) / max(sum(node_cpu), 1e-9), 3),
        # script runs (EVALSHA: a client's calls) and every command run, scripts' own
        # included, over every master, per page
        "redis_scripts_per_page": round(
            sum(b[0] - a[0] for a, b in zip(cmd0, cmd1, strict=True)) / max(pages, 1), 3
        ),
        "redis_commands_per_page": round(
            sum(b[1] - a[1] for a, b in zip(cmd0, cmd1, strict=True)) / max(pages, 1), 3
        ),
        # derived, not measured: the rate at which this Redis CPU per page fills one core
        "redis_bound_pages_per_s": round(pages / max(cpu1 - cpu0, 1e-9)),
        "driver_cpu_cores": round(sum(r["cpu"] for r in runs) / elapsed, 3),
        "empty_claims": sum(r["empty_claims"] for r in runs),
        # client-side wall time per 1,000 pages, summed over processes
        "ms_per_1k_pages": {k: round(v / max(pages, 1) * 1e6, 1) for k, v in ops.items()},
        "keys_per_node": server.keys_per_node(),
    }


def cpu_per_node(server: Server) -> list[float]:
    """Each master's Redis CPU seconds so far (one server: one)."""
    if isinstance(server, MastersCluster):
        return server.cpu_per_node()
    if isinstance(server, ClusterServer):
        return [
            float(info["used_cpu_sys"]) + float(info["used_cpu_user"])
            for info in (node.info("cpu") for node in server.nodes)
        ]
    return [server.cpu_seconds()]


def commands_per_node(server: Server) -> list[tuple[int, int]]:
    """Each master's (script runs, commands) so far: EVALSHA and EVAL calls
    (INFO commandstats: the calls clients make), and every command it ran,
    those inside scripts too (INFO stats)."""
    nodes = server.nodes if isinstance(server, MastersCluster | ClusterServer) else [server.client]
    out = []
    for node in nodes:
        stats = node.info("commandstats")
        scripts = sum(
            int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in ("evalsha", "eval")
        )
        out.append((scripts, int(node.info("stats")["total_commands_processed"])))
    return out


def machine(server: Server) -> dict[str, Any]:
    model = next(
        (
            ln.split(":", 1)[1].strip()
            for ln in Path("/proc/cpuinfo").read_text().splitlines()
            if ln.startswith("model name")
        ),
        platform.processor(),
    )
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "python": platform.python_version(),
        "redis_server": server.client.info("server")["redis_version"],
        "redis_py": redis.__version__,
        "scrapy_redis": scrapy_redis.__version__,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--hosts", type=int, default=1000)
    p.add_argument("--seeds-per-host", type=int, default=4)
    p.add_argument("--claim-n", type=int, default=64, help="max URLs per claim call (per shard)")
    p.add_argument("--links", type=int, default=20, help="links per page")
    p.add_argument("--seen-fraction", type=float, default=0.5)
    p.add_argument("--duration", type=float, default=20.0, help="seconds per scenario")
    p.add_argument("--max-pages", type=int, default=100_000, help="per scenario, all procs")
    p.add_argument("--procs", default="1,2")
    p.add_argument("--modes", default="frontier,worker")
    p.add_argument("--systems", default="ours,scrapy-redis")
    p.add_argument("--redis", default="single", help="single, cluster or single,cluster")
    p.add_argument(
        "--masters",
        help="with --redis cluster: clusters of these sizes (e.g. 1,2,3,4), each its own\n"
        "(bench/cluster_masters.py); without it the 3-master cluster of the tests",
    )
    p.add_argument(
        "--shards", type=int, default=None, help="the crawl's shard count (default: a new crawl's)"
    )
    p.add_argument(
        "--revs",
        metavar="BASE,REV[,REV...]",
        help="run each scenario on every revision's export (drivers and seeding import it),\n"
        "--repeats rounds in alternating order; medians and their ratio to the first",
    )
    p.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="rounds per scenario, in alternating order of the revisions (--revs) or systems",
    )
    a = p.parse_args()
    revs: list[tuple[str | None, Path | None]] = [(None, None)]
    if a.revs is not None:
        if any(system not in POLICY_MODES for system in a.systems.split(",")):
            p.error(f"--revs compares our frontier: --systems {','.join(POLICY_MODES)}")
        from crawl_rate import export_revs  # the workers' exports of commits, shared

        try:
            exports = export_revs(a.revs)
        except ValueError as exc:
            p.error(str(exc))
        revs = [(label, root) for label, root, _ in exports]
    cfg = Config(
        a.hosts,
        a.seeds_per_host,
        a.claim_n,
        a.links,
        a.seen_fraction,
        a.duration,
        a.max_pages,
        a.shards or ds.CRAWL_FRONTIER_SHARDS or NEW_CRAWL_SHARDS,
    )
    if a.revs is None:  # with --revs each driver checks its revision's templates itself
        Links(UrlSpace(cfg.hosts, 1), False).verify()
    kinds = a.redis.split(",")
    if a.masters is not None:
        if "cluster" not in kinds:
            p.error("--masters goes with --redis cluster")
        sizes = [int(n) for n in a.masters.split(",")]
        at = kinds.index("cluster")
        kinds[at : at + 1] = [f"cluster:{n}" for n in sizes]
    servers: dict[str, Server] = {}
    rows: list[dict[str, Any]] = []
    try:
        # All up from the start, so each scenario runs on one Redis and on the
        # clusters back to back (this machine's speed drifts over an hour).
        for kind in kinds:
            servers[kind] = (
                MastersCluster(int(kind.split(":")[1]))
                if kind.startswith("cluster:")
                else ClusterServer()
                if kind == "cluster"
                else RedisServer()
            )
        info = machine(servers[kinds[0]])
        systems = a.systems.split(",")
        for mode in a.modes.split(","):
            for procs in (int(x) for x in a.procs.split(",")):
                for system, kind, rnd, label, code in schedule(
                    systems, list(servers), a.repeats, revs if a.revs is not None else None
                ):
                    if kind.startswith("cluster") and system not in POLICY_MODES:
                        continue  # scrapy-redis has no cluster keys
                    server = servers[kind]
                    run = Config(**{**asdict(cfg), "url": server.url})
                    r = scenario(server, kind.split(":")[0], system, mode, procs, run, code)
                    rows.append({**r, "rev": label, "round": rnd})
                    shown = f" {label} #{rnd}" if label else f" #{rnd}" if a.repeats > 1 else ""
                    print(
                        f"  {kind:9} {system:12} {mode:8} x{procs}{shown}: "
                        f"{r['pages_per_s']:>8,.0f} pages/s, busiest master "
                        f"{r['busiest_master_share']:.2f} of Redis CPU",
                        flush=True,
                    )
    finally:
        for server in servers.values():
            server.stop()
    for r in rows:
        same = [
            b
            for b in rows
            if (b["mode"], b["procs"], b["rev"], b["round"])
            == (r["mode"], r["procs"], r["rev"], r["round"])
        ]
        here = [b for b in same if (b["redis"], b["masters"]) == (r["redis"], r["masters"])]
        base = next((b for b in here if b["system"] == "scrapy-redis"), None)
        if r["system"] == "ours" and base:
            r["ratio_vs_scrapy_redis"] = round(r["pages_per_s"] / base["pages_per_s"], 2)
        single = next(
            (b for b in same if b["system"] == r["system"] and b["redis"] == "single"), None
        )
        if r["redis"] == "cluster" and single:
            r["ratio_cluster_vs_single"] = round(r["pages_per_s"] / single["pages_per_s"], 3)
        depth = next((b for b in here if b["system"] == "ours"), None)
        if r["system"] == "ours-aopic" and depth:
            r["ratio_aopic_vs_depth"] = round(r["pages_per_s"] / depth["pages_per_s"], 3)
    report(rows, cfg, info)
    by_rev = rev_medians(rows, [label for label, _ in revs]) if a.revs else []
    by_system = system_medians(rows) if a.revs is None and a.repeats > 1 else []
    result = result_record(
        "frontier_ops",
        machine=info,
        config={**asdict(cfg), "url": None},
        target_pages_per_s=TARGET_PAGES_S,
        results=rows,
    )
    name = "frontier_ops.json"
    if a.revs:
        result["revs"] = [info for _, _, info in exports]
        result["rev_medians"] = by_rev
        name = "frontier_ops-revs.json"  # never overwrites the benchmark's own file
    if by_system:
        result["system_medians"] = by_system
    print(f"\nwrote {write_result(name, result)}")


def schedule(
    systems: list[str],
    kinds: list[str],
    repeats: int,
    revs: list[tuple[str | None, Path | None]] | None,
) -> Iterator[tuple[str, str, int, str | None, Path | None]]:
    """The scenarios of one mode and driver count, in the order they run:
    (system, redis kind, round, revision label, its export). With revisions
    (--revs), each system's rounds alternate them (A B, then B A); without,
    the rounds alternate the systems. Each system runs on one Redis and then
    the cluster, back to back."""
    if revs is not None:
        for system in systems:
            for kind in kinds:
                for i in range(repeats):
                    for label, code in revs if i % 2 == 0 else revs[::-1]:
                        yield system, kind, i + 1, label, code
        return
    for i in range(repeats):
        for system in systems if i % 2 == 0 else systems[::-1]:
            for kind in kinds:
                yield system, kind, i + 1, None, None


def system_medians(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """--repeats without --revs: each system's median pages/s and Redis CPU per
    page per scenario, and AOPIC ÷ depth order per round and of the medians."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[(r["redis"], r["masters"], r["system"], r["mode"], r["procs"])].append(r)
    out = []
    for (kind, masters, system, mode, procs), runs in groups.items():
        row: dict[str, Any] = {
            "redis": kind,
            "masters": masters,
            "system": system,
            "mode": mode,
            "procs": procs,
            "runs": [r["pages_per_s"] for r in runs],
            "median_pages_per_s": statistics.median(r["pages_per_s"] for r in runs),
            "median_redis_cpu_us_per_page": statistics.median(
                r["redis_cpu_us_per_page"] for r in runs
            ),
        }
        ratios = [r["ratio_aopic_vs_depth"] for r in runs if "ratio_aopic_vs_depth" in r]
        depth = groups.get((kind, masters, "ours", mode, procs))  # get: no key made mid-iteration
        if ratios and depth:
            row["ratios_aopic_vs_depth"] = ratios
            row["median_ratio_aopic_vs_depth"] = statistics.median(ratios)
            row["ratio_aopic_vs_depth_of_medians"] = round(
                row["median_pages_per_s"] / statistics.median(r["pages_per_s"] for r in depth), 3
            )
        out.append(row)
        print(
            f"  {kind} {system} {mode} x{procs}: median pages/s {row['median_pages_per_s']:,.0f}"
            f" (rounds {', '.join(f'{x:,.0f}' for x in row['runs'])}), median Redis CPU "
            f"{row['median_redis_cpu_us_per_page']:.1f} us/page"
            + (
                f"; AOPIC / depth per round {', '.join(f'{x:.3f}' for x in ratios)}, of the "
                f"medians {row['ratio_aopic_vs_depth_of_medians']:.3f}"
                if "ratio_aopic_vs_depth_of_medians" in row
                else ""
            )
        )
    return out


def rev_medians(rows: list[dict[str, Any]], labels: list[str | None]) -> list[dict[str, Any]]:
    """--revs: each scenario's median pages/s per revision, and each ÷ the first's;
    the median Redis CPU per page too (on a shared machine it moves less than pages/s)."""
    groups: dict[tuple[Any, ...], dict[str | None, list[dict[str, Any]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for r in rows:
        groups[(r["redis"], r["masters"], r["system"], r["mode"], r["procs"])][r["rev"]].append(r)
    out = []
    for (kind, masters, system, mode, procs), by_rev in groups.items():
        med = {
            label: statistics.median(r["pages_per_s"] for r in by_rev[label]) for label in labels
        }
        cpu = {
            label: statistics.median(r["redis_cpu_us_per_page"] for r in by_rev[label])
            for label in labels
        }
        base = med[labels[0]]
        out.append(
            {
                "redis": kind,
                "masters": masters,
                "system": system,
                "mode": mode,
                "procs": procs,
                "runs": {label: [r["pages_per_s"] for r in by_rev[label]] for label in labels},
                "median_pages_per_s": med,
                "ratio_to_baseline": {label: round(med[label] / base, 3) for label in labels[1:]},
                "median_redis_cpu_us_per_page": cpu,
            }
        )
        print(
            f"  {kind} {system} {mode} x{procs}: median pages/s "
            + ", ".join(f"{label} {med[label]:,.0f}" for label in labels)
            + "; "
            + ", ".join(f"{label} / {labels[0]} {med[label] / base:.3f}" for label in labels[1:])
            + "; median Redis CPU us/page "
            + ", ".join(f"{label} {cpu[label]:.0f}" for label in labels)
        )
    return out


def report(rows: list[dict[str, Any]], cfg: Config, info: dict[str, Any]) -> None:
    print(
        f"\nFrontier alone: {cfg.hosts} hosts, {cfg.shards} shards, claim {cfg.claim_n}/shard, "
        f"{cfg.links} links/page (~{cfg.seen_fraction:.0%} seen), host delay 0, "
        f"{info['cpus']} CPUs, redis {info['redis_server']}"
    )
    head = (
        f"{'redis':7} {'system':12} {'mode':8} {'procs':>5} {'pages':>8} {'pages/s':>8} "
        f"{'links/s':>9} "
        f"{'redis CPU':>9} {'us/page':>7} {'scripts/pg':>10} {'1-core cap':>10} {'driver CPU':>10} "
        f"{'vs s-r':>6}"
    )
    print(head + "\n" + "-" * len(head))
    for r in rows:
        ratio = f"{r['ratio_vs_scrapy_redis']:.2f}x" if "ratio_vs_scrapy_redis" in r else ""
        print(
            f"{r['redis']:7} {r['system']:12} {r['mode']:8} {r['procs']:>5} {r['pages']:>8} "
            f"{r['pages_per_s']:>8,.0f} {r['links_per_s']:>9,.0f} {r['redis_cpu_cores']:>9.2f} "
            f"{r['redis_cpu_us_per_page']:>7.0f} {r['redis_scripts_per_page']:>10.3f} "
            f"{r['redis_bound_pages_per_s']:>10,} "
            f"{r['driver_cpu_cores']:>10.2f} {ratio:>6}"
        )
    print("redis CPU / driver CPU: cores busy (1.00 = one core); us/page: Redis CPU per page;")
    print("1-core cap = 1e6 / us/page: pages/s if Redis had a whole core (derived, not measured).")
    print("scrapy-redis does less per page: no politeness, no leases, no acks; one round trip")
    print("per link. frontier mode: payloads templated (checked = real bytes); worker mode: the")
    print(f"full per-link Python path. Target: >= {TARGET_PAGES_S:,} pages/s on one Redis.")
    for r in rows:
        if "ratio_cluster_vs_single" in r:
            print(
                f"  {r['masters']}-master cluster / one Redis, {r['system']} {r['mode']} "
                f"x{r['procs']}: {r['ratio_cluster_vs_single']:.3f} (keys per master "
                f"{r['keys_per_node']})"
            )
    for r in rows:
        if r["redis"] == "cluster":
            per = ", ".join(f"{c:.0f}" for c in r["redis_cpu_us_per_page_per_master"])
            print(
                f"  {r['masters']} master(s), {r['system']} {r['mode']} x{r['procs']}: "
                f"{r['pages_per_s']:,.0f} pages/s; Redis CPU us/page per master {per}; "
                f"busiest master {r['busiest_master_share']:.3f} of it (even: "
                f"{1 / r['masters']:.3f}); {r['redis_scripts_per_page']:.3f} script runs/page"
            )
    for r in rows:
        if "ratio_aopic_vs_depth" in r:
            print(
                f"  AOPIC / depth policy, {r['mode']} x{r['procs']}: "
                f"{r['ratio_aopic_vs_depth']:.3f} (target >= 0.80)"
            )
    for r in rows:
        if r["ms_per_1k_pages"]:
            parts = ", ".join(f"{k} {v:.0f}" for k, v in r["ms_per_1k_pages"].items())
            name = f"{r['redis']} {r['system']} {r['mode']} x{r['procs']}"
            print(f"  {name}: ms per 1k pages (client wall): {parts}")


if __name__ == "__main__":
    main()
