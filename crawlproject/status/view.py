"""``crawlproject status``: is the fleet keeping up? One read of the crawl's Redis.

What it shows (all from Redis; times on Redis' clock):

* frontier: URLs queued, leased (in flight), done, enqueued, seen hits;
  the seen set (URLs in it; a Bloom filter's capacity used and expected
  false-positive rate);
  hosts ready now (their delay has passed: ``due``, and ``ready`` entries
  whose time has come) and hosts waiting on their politeness delay; leases in
  flight and leases expired (their worker died or hung: reclaimed soon);
  leases reclaimed and URLs poisoned (reclaimed CRAWL_MAX_RECLAIMS times: set aside);
* throughput: responses per second over the last minute, from the
  10-second buckets the workers add to (``tp``), and the buckets of the last
  hour (the status page's chart: ``series_last_hour``, [bucket start, pages]);
* hosts: the busiest and the failing hosts, summed from the workers' reports
  of their own top hosts (``hr``, crawlproject/status/hosts.py);
* workers alive (a heartbeat within the lease time) with their gauges;
* the fleet's counters (``stats``): pages, items, errors, robots.txt,
  duplicates, storage (files waiting for upload: the storage lag; bytes
  spooled and workers paused until their spool drains), recrawl;
* the duplicate index: pages in it, exact and near duplicates found, its
  layout (near tables and their level);
* the recrawl backlog (tracked, overdue, oldest overdue age) when there is one;
* politeness per server: places taken, URLs sent back to wait and hosts
  woken, the addresses at their cap and the hosts waiting on one
  (crawlproject/status/addresses.py).

The signals for adding crawlers: queued URLs and hosts ready now grow while
throughput stays flat; for removing them: hosts ready now near zero (every
host waits on its delay: more workers would only wait too).
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

from crawlproject.dedupe.index import index_figures
from crawlproject.frontier.store.budgets import waiting_over_budget
from crawlproject.frontier.store.keys import BANDS
from crawlproject.frontier.store.seen_set import seen_figures
from crawlproject.recrawl.store import RecrawlStore
from crawlproject.status.addresses import address_tables, collect_addresses, display_text
from crawlproject.status.hosts import merge_reports
from crawlproject.status.reporter import (
    THROUGHPUT_BUCKET_SECONDS,
    THROUGHPUT_KEEP_SECONDS,
    error_count,
)

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from crawlproject.frontier.store.keys import CrawlKeys

THROUGHPUT_WINDOW_SECONDS = 60
STAT_GROUPS = (
    "robotstxt/", "dedupe/", "store/", "recrawl/", "trap/", "sitemap/", "web/error/", "render/"
)  # fmt: skip


async def collect_status(redis: Redis, keys: CrawlKeys, lease_ms: int) -> dict[str, Any]:
    """The crawl's status as a JSON-able dict (see the module docstring)."""
    seconds, micros = await redis.time()
    now_ms = int(seconds) * 1000 + int(micros) // 1000
    now_s = now_ms / 1000
    pipe = redis.pipeline(transaction=False)
    for shard in range(keys.shards):
        pipe.hgetall(keys.counters(shard))
        for band in range(BANDS):  # hosts due (a stale entry counts until a claim drops it)
            pipe.llen(keys.due(shard, band))
        pipe.zcount(keys.ready(shard), "-inf", now_ms)
        pipe.zcount(keys.ready(shard), f"({now_ms}", "+inf")
        pipe.zcard(keys.leases(shard))
        pipe.zcount(keys.leases(shard), "-inf", now_ms)
    pipe.hgetall(keys.throughput)
    pipe.zrange(keys.workers, 0, -1, withscores=True)
    pipe.hgetall(keys.fleet_stats)
    pipe.llen(keys.start_urls)
    pipe.hvals(keys.host_reports)
    replies = await pipe.execute()

    counters: dict[str, int] = defaultdict(int)
    hosts_ready = hosts_waiting = leases = leases_expired = 0
    per_shard = 5 + BANDS
    for shard in range(keys.shards):
        h, *dues, ready_now, ready_later, n_leases, expired = replies[
            shard * per_shard : (shard + 1) * per_shard
        ]
        due = sum(dues)
        for k, v in h.items():
            counters[display_text(k)] += int(v)
        hosts_ready += int(due) + int(ready_now)
        hosts_waiting += int(ready_later)
        leases += int(n_leases)
        leases_expired += int(expired)
    throughput, workers, fleet, start_urls, host_reports = replies[keys.shards * per_shard :]

    buckets = {int(k): int(v) for k, v in throughput.items()}
    window_start = now_s - THROUGHPUT_WINDOW_SECONDS
    recent = {t: n for t, n in buckets.items() if t >= window_start}
    hour = sorted((t, n) for t, n in buckets.items() if t > now_s - THROUGHPUT_KEEP_SECONDS)
    if recent:
        # From the start of the oldest bucket kept to now (the newest is partial).
        span = max(now_s - min(recent), THROUGHPUT_BUCKET_SECONDS)
        pages_per_second = sum(recent.values()) / span
    else:
        pages_per_second = 0.0

    alive = []
    for worker, heartbeat_ms in workers:
        if now_ms - heartbeat_ms <= lease_ms:
            alive.append(display_text(worker))
    gauges = {}
    if alive:
        gpipe = redis.pipeline(transaction=False)
        for worker in alive:
            gpipe.hgetall(keys.worker_gauges(worker))
        for worker, g in zip(alive, await gpipe.execute(), strict=True):
            gauges[worker] = {display_text(k): float(v) for k, v in g.items()}

    fleet_stats = {display_text(k): int(v) for k, v in fleet.items()}
    backlog = await RecrawlStore(redis, keys).backlog(now_s)
    seen = await seen_figures(redis, keys)
    return {
        "crawl": keys.crawl,
        "time": round(now_s, 3),
        "frontier": {
            "queued": counters.get("queued", 0),
            "leased": counters.get("leased", 0),
            "done": counters.get("done", 0),
            "enqueued": counters.get("enqueued", 0),
            "seen_hits": counters.get("seen_hits", 0),
            "parked": counters.get("parked", 0) - counters.get("unparked", 0),
            "reclaimed": counters.get("reclaimed", 0),
            # Set aside after CRAWL_MAX_RECLAIMS reclaims: they kill or hang workers.
            "poisoned": counters.get("poisoned", 0),
            # Trap guards (add.lua): URLs over their host's budget waiting now
            # in its overflow (held minus released: crawlproject budget
            # --release, votes, a raised budget), and released so far; URLs
            # parked because their token shape is minted per render.
            "waiting_over_budget": waiting_over_budget(counters),
            "released_from_budget": counters.get("budget_released", 0),
            "token_parked": counters.get("token_parked", 0),
            "start_urls": int(start_urls),
            "hosts_ready_now": hosts_ready,
            "hosts_waiting_on_delay": hosts_waiting,
            "leases_in_flight": leases,
            "leases_expired": leases_expired,
            # The seen set: URLs in it; a Bloom filter's capacity used and
            # false-positive rate expected at that fill (crawlproject/frontier/store/seen_set.py).
            "seen": seen.as_dict(),
        },
        "throughput": {
            "pages_per_second_last_minute": round(pages_per_second, 3),
            "pages_last_minute": sum(recent.values()),
            "pages_last_hour": sum(n for _, n in hour),
            "bucket_seconds": THROUGHPUT_BUCKET_SECONDS,
            "series_last_hour": [[t, n] for t, n in hour],
        },
        "hosts": merge_reports(host_reports, now_s),
        "workers": {
            "alive": len(alive),
            "known": len(workers),
            "gauges": gauges,
        },
        "fleet": {
            "pages": fleet_stats.get("response_received_count", 0),
            "items": fleet_stats.get("item_scraped_count", 0),
            "errors": error_count(fleet_stats),
            "groups": {
                group.rstrip("/"): {
                    k[len(group) :]: v
                    for k, v in sorted(fleet_stats.items())
                    if k.startswith(group)
                }
                for group in STAT_GROUPS
            },
        },
        "storage": {
            "files_waiting_for_upload": int(
                sum(g.get("store_files_pending", 0) for g in gauges.values())
            ),
            "files_uploaded": fleet_stats.get("store/files_uploaded", 0),
            "pages_stored": fleet_stats.get("store/pages", 0),
            "bytes_spooled": int(sum(g.get("store_spool_bytes", 0) for g in gauges.values())),
            # Workers not taking new pages until their spool drains (backpressure).
            "workers_paused": sum(1 for g in gauges.values() if g.get("store_paused")),
        },
        "addresses": await collect_addresses(redis, keys, counters, now_ms),
        # Pages in the duplicate index, the duplicates it found, its layout
        # (crawlproject/dedupe/index.py).
        "dedupe": await index_figures(redis, keys),
        "recrawl": {
            "tracked": backlog.tracked,
            "overdue": backlog.overdue,
            "oldest_overdue_seconds": round(backlog.oldest_overdue_seconds, 3),
        },
    }


def index_layout(dedupe: dict[str, Any]) -> str:
    """The duplicate index's near tables and their level, as the views show them."""
    if dedupe["layout"] == "growing":
        return f"{dedupe['near_tables']} ({dedupe['near_level']})"
    if dedupe["layout"] == "one-tag":
        return "one-tag index: run crawlproject dedupe migrate"
    return f"{dedupe['near_tables']} (fixed)" if dedupe["layout"] == "fixed" else "-"


def render(status: dict[str, Any]) -> Any:
    """The status as rich tables, for a terminal."""
    from rich.console import Group
    from rich.table import Table

    f, t, w, fl = status["frontier"], status["throughput"], status["workers"], status["fleet"]
    head = Table(title=f"crawl {status['crawl']}", show_header=False, box=None)
    head.add_column(style="bold")
    head.add_column(justify="right")
    head.add_column(style="bold")
    head.add_column(justify="right")
    rows = [
        ("queued URLs", f["queued"], "pages/s (last minute)", t["pages_per_second_last_minute"]),
        ("in flight (leases)", f["leases_in_flight"], "workers alive", w["alive"]),
        ("leases expired", f["leases_expired"], "pages fetched", fl["pages"]),
        ("hosts ready now", f["hosts_ready_now"], "items", fl["items"]),
        ("hosts waiting on delay", f["hosts_waiting_on_delay"], "errors", fl["errors"]),
        ("done", f["done"], "files waiting for upload",
         status["storage"]["files_waiting_for_upload"]),
        ("parked URLs", f["parked"], "recrawl overdue", status["recrawl"]["overdue"]),
        ("leases reclaimed", f["reclaimed"], "poisoned URLs", f["poisoned"]),
        ("URLs waiting over budget", f["waiting_over_budget"], "URLs parked (minted tokens)",
         f["token_parked"]),
        ("bytes spooled", status["storage"]["bytes_spooled"], "workers paused (spool full)",
         status["storage"]["workers_paused"]),
        ("pages in the duplicate index", status["dedupe"]["pages"],
         "near tables (level)", index_layout(status["dedupe"])),
    ]  # fmt: skip
    for a, av, b, bv in rows:
        head.add_row(a, _fmt(av), b, _fmt(bv))
    seen = f["seen"]
    if "capacity" in seen:
        kind = "Bloom: capacity used, FP rate"
        shown = f"{seen['capacity_used']:.1%}, {seen['expected_fp_rate']:.2g}"
    else:
        kind, shown = "seen set", seen["filter"]
    head.add_row("URLs seen", _fmt(seen["urls"]), kind, shown)
    parts: list[Any] = [head]
    if w["gauges"]:
        workers = Table(title="workers")
        for col in ("worker", "pages/s", "in flight", "files pending", "spool MB", "paused",
                    "report age s"):  # fmt: skip
            workers.add_column(col, justify="right" if col != "worker" else "left")
        for worker, g in sorted(w["gauges"].items()):
            age = status["time"] - g.get("reported_at", status["time"])
            workers.add_row(
                worker,
                f"{g.get('responses_per_second', 0):.1f}",
                _fmt(g.get("in_flight", 0)),
                _fmt(g.get("store_files_pending", 0)),
                f"{g.get('store_spool_bytes', 0) / 1e6:.1f}",
                "yes" if g.get("store_paused") else "",
                f"{age:.1f}",
            )
        parts.append(workers)
    hosts = status.get("hosts", {})
    for title, rows in (("busiest hosts", hosts.get("busiest")),
                        ("failing hosts", hosts.get("failing"))):  # fmt: skip
        if rows:
            table = Table(title=title)
            table.add_column("host")
            table.add_column("pages", justify="right")
            table.add_column("errors", justify="right")
            for row in rows:
                table.add_row(row["host"], _fmt(row["pages"]), _fmt(row["errors"]))
            parts.append(table)
    parts += address_tables(status["addresses"])
    groups = Table(title="fleet counters")
    groups.add_column("group")
    groups.add_column("counters")
    for group, values in fl["groups"].items():
        if values:
            groups.add_row(group, ", ".join(f"{k} {_fmt(v)}" for k, v in values.items()))
    if groups.row_count:
        parts.append(groups)
    return Group(*parts)


def _fmt(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.1f}"
    return f"{int(value):,}"
