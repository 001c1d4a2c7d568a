"""``crawlproject``: operate a crawl from the shell.

    crawlproject seed URL [URL ...]      add seeds to a running or stopped crawl; one
                                          line per URL: queued, already seen, refused
    crawlproject seed --file seeds.txt
    crawlproject counts                   frontier counters as JSON
    crawlproject parked [--requeue]       URLs set aside (traps, hosts that cannot
                                          answer), per host (JSON);
                                          --requeue puts them all back in their queues
    crawlproject parked --reasons         per host, why its URLs were contained and
                                          how many: token (a session id minted per
                                          render), budget (over its budget, waiting
                                          for votes), duplicates, dns, ...; a
                                          soft-404 space's probe URL (JSON)
    crawlproject poisoned [--requeue]     URLs set aside after CRAWL_MAX_RECLAIMS reclaims
                                          (each worker that took them died or hung; JSON);
                                          --requeue puts them back once the cause is fixed
    crawlproject dead [--explain|--requeue|--drop]  requests that could not be read back
                                          (JSON: host, URL; --explain: why, checked against
                                          the crawl's spider); --requeue puts them back
    crawlproject recrawl [--once|--all]   queue the URLs due for a recrawl (runs until
                                          stopped; --once: one pass; --all: every
                                          tracked URL now, due or not, then exit)
    crawlproject recrawl --status         the recrawl backlog as JSON (tracked,
                                          overdue, oldest_overdue_seconds)
    crawlproject status [--json] [--watch S]  the fleet at a glance: frontier, hosts ready
                                          vs waiting, leases, pages/s over the last
                                          minute, workers, counters, storage lag,
                                          recrawl backlog (a table, or JSON)
    crawlproject status --serve [ADDR:]PORT  the same as a live web page, with pages/s
                                          over the last hour and the busiest and
                                          failing hosts (binds 127.0.0.1 by default)
    crawlproject budget [--release [HOST ...]]  URLs waiting over their host's budget
                                          (JSON), or released into their queues
    crawlproject reset --crawl NAME [--yes]  delete every key of crawl NAME so it
                                          starts over; asks first, refused while
                                          its workers are alive
    crawlproject dedupe migrate --crawl NAME  a duplicate index of the one-tag layout
                                          (before issue 42) made spread, the one
                                          layout read now; one line at the end
    crawlproject body URL [--headers]     a stored page's body (or status and headers),
                                          found through the WARC files' indexes or
                                          the object format's (status and
                                          Content-Type only: no other headers kept);
                                          a URL that redirected: its 3xx record
    crawlproject wacz --output FILE.wacz  the crawl's WARC files as one WACZ package
                                          (CDXJ index, pages.jsonl, datapackage.json)

All read the project settings (``REDIS_URL``, ``CRAWL_*``, ``AWS_*``), so they
reach the same Redis and body store as ``scrapy crawl web`` run from the same
folder: ``REDIS_URL``, ``CRAWL_NAME`` and ``CRAWL_DATA_DIR`` from the
environment too, scrapy-redis's ``REDIS_HOST``/``REDIS_PORT``/``REDIS_PARAMS``
(crawlproject/frontier/crawl/redis_settings.py); with none of them they use (and if
needed start) the embedded one. A setting they cannot use is one line on
stderr and exit status 1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import logging
import signal
import sys
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError
from scrapy.utils.project import get_project_settings

from crawlproject.budget_cli import add_budget_parser, budget_command, hosts_need_release
from crawlproject.closed_pipe import quiet_on_closed_pipe
from crawlproject.dedupe.config import DedupeConfig
from crawlproject.dedupe.migrate import MigrateRefused
from crawlproject.dedupe.soft404 import soft404_hosts
from crawlproject.dedupe_cli import add_dedupe_parser, dedupe_command, dedupe_target
from crawlproject.frontier.connection.embedded import EmbeddedRedis
from crawlproject.frontier.connection.redis_client import command_client
from crawlproject.frontier.crawl.config import ConfigError, FrontierConfig
from crawlproject.frontier.crawl.crawl_name import crawl_name, crawl_name_of
from crawlproject.frontier.crawl.dead import dead_command
from crawlproject.frontier.store.keys import CRAWL_NAME_RE, CrawlKeys
from crawlproject.frontier.store.redis_frontier import RedisFrontier
from crawlproject.recrawl.config import RecrawlConfig
from crawlproject.recrawl.service import RecrawlService
from crawlproject.recrawl.store import RecrawlStore
from crawlproject.reset_cli import add_reset_parser, one_line_refusal, reset_command, reset_target
from crawlproject.security.redaction import redact
from crawlproject.seed_cli import SeedRun, seed_urls
from crawlproject.setting_check import refuse_unreadable
from crawlproject.status.command import status_command
from crawlproject.store.body_cli import print_body
from crawlproject.store.config import StoreConfig
from crawlproject.store.wacz import wacz_command

CLI_CLIENT_ID = "cli"
LOG_FORMAT = "%(asctime)s [%(name)s] %(levelname)s: %(message)s"  # as Scrapy's


async def _recrawl(
    config: FrontierConfig, recrawl: RecrawlConfig, redis: Redis, keys: CrawlKeys, mode: str
) -> None:
    service = RecrawlService(
        RecrawlStore(redis, keys), recrawl, config.host_delay_ms, config.host_concurrency
    )
    if mode == "status":
        backlog = await service.backlog()
        print(json.dumps(dataclasses.asdict(backlog), sort_keys=True))
        return
    if mode in ("once", "all"):
        done = await service.run_pass(everything=mode == "all")
        print(json.dumps(dataclasses.asdict(done), sort_keys=True))
        return
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s [%(name)s] %(levelname)s: %(message)s"
    )
    total = await service.run(stop)
    print(json.dumps(dataclasses.asdict(total), sort_keys=True))


async def _with_redis(
    config: FrontierConfig,
    crawl: str,
    action: str,
    urls: list[str],
    recrawl: RecrawlConfig | None = None,
    status_args: tuple[bool, float | None, tuple[str, int] | None, bool] | None = None,
    run: Callable[[Redis, CrawlKeys], Awaitable[None]] | None = None,
) -> int:
    embedded = None
    if config.redis_url is None:
        embedded = EmbeddedRedis(config.data_dir)
        redis = await embedded.connect(client_name=CLI_CLIENT_ID)
    else:
        redis = command_client(config.redis_url)
    try:
        if status_args is not None and status_args[2] is not None:
            keys = config.crawl_keys(crawl)  # the page reads the crawl's shards itself
        else:
            keys = await config.open_keys(redis, crawl, adopt=True)  # the crawl's own shards
        if run is not None:
            await run(redis, keys)
        elif status_args is not None:
            await status_command(config, redis, keys, *status_args)
        elif recrawl is not None:
            await _recrawl(config, recrawl, redis, keys, action)
        else:
            frontier = RedisFrontier(
                redis, keys, config.host_delay_ms, config.host_concurrency, config.lease_ms,
                seen=config.seen,
            )  # fmt: skip
            if action == "counts":
                counts = await frontier.counters()
                counts["workers"] = int(await redis.zcard(keys.workers))
                print(json.dumps(counts, sort_keys=True))
            elif action == "parked":
                print(json.dumps(await frontier.parked_by_host(), sort_keys=True))
            elif action == "parked-reasons":
                reasons: dict[str, dict[str, object]] = {
                    host: dict(why) for host, why in (await frontier.trap_reasons()).items()
                }
                # Soft-404 spaces are not parked (their real pages are crawled):
                # their pages within the probe's distance are judged, so show the probe.
                for host, probe in (await soft404_hosts(redis, keys.soft404)).items():
                    reasons.setdefault(host, {})["soft404_probe"] = probe
                print(json.dumps(reasons, sort_keys=True))
            elif action == "poisoned":
                print(json.dumps(sorted(await frontier.poisoned_urls())))
            elif action == "requeue-poisoned":
                print(f"requeued {await frontier.unpark_all('poison')} poisoned URL(s)")
            else:  # parked --requeue
                print(f"requeued {await frontier.unpark_all()} parked URL(s)")
    finally:
        if embedded is None:
            await redis.aclose()
        else:
            await embedded.leave(redis, CLI_CLIENT_ID)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return quiet_on_closed_pipe(partial(_main, argv))  # closed_pipe.py: `| head` ends quietly


def _main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="crawlproject", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--crawl", help="crawl name (default: CRAWL_NAME, else web); a spider's own: its name"
    )
    parser.add_argument("--redis-url", help="Redis server (default: REDIS_URL, else embedded)")
    parser.add_argument(
        "-s", "--set", action="append", default=[], metavar="NAME=VALUE",
        help="a setting, as with scrapy crawl -s (e.g. CRAWL_DATA_DIR, CRAWL_STORE_URI)",
    )  # fmt: skip
    sub = parser.add_subparsers(dest="command", required=True)
    seed = sub.add_parser("seed", help="add seed URLs to the crawl")
    seed.add_argument("urls", nargs="*")
    seed.add_argument("--file", type=Path, help="one URL per line, # comments")
    sub.add_parser("counts", help="print the frontier counters as JSON")
    parked = sub.add_parser(
        "parked", help="URLs set aside (traps, hosts that cannot answer), per host"
    )
    parked_how = parked.add_mutually_exclusive_group()
    parked_how.add_argument(
        "--requeue", action="store_true", help="put every parked URL back in its host queue"
    )
    parked_how.add_argument(
        "--reasons", action="store_true",
        help="per host, why its URLs were contained and how many (over budget included)",
    )  # fmt: skip
    poisoned = sub.add_parser(
        "poisoned", help="URLs set aside after CRAWL_MAX_RECLAIMS reclaims (they kill workers)"
    )
    poisoned.add_argument(
        "--requeue", action="store_true",
        help="put every poisoned URL back in its host queue (once the cause is fixed)",
    )  # fmt: skip
    dead = sub.add_parser("dead", help="stored requests that could not be read back")
    dead_how = dead.add_mutually_exclusive_group()
    for flag, what in (
        ("--explain", "say why each cannot be read back (checked against the crawl's spider)"),
        ("--requeue", "put each back in its host queue (not seen-tested again)"),
        ("--drop", "delete them"),
    ):
        dead_how.add_argument(flag, action="store_true", help=what)
    dead.add_argument("--spider", help="the spider to check against (default: the crawl's name)")
    status = sub.add_parser("status", help="the fleet at a glance (frontier, workers, counters)")
    status.add_argument("--json", action="store_true", help="one JSON object (a line per refresh)")
    status.add_argument("--watch", type=float, metavar="SECONDS", help="refresh every SECONDS")
    status.add_argument(
        "--serve", metavar="[ADDRESS:]PORT",
        help="serve a live status page (read-only; 127.0.0.1 unless ADDRESS is given)",
    )  # fmt: skip
    recrawl = sub.add_parser("recrawl", help="queue the URLs due for a recrawl")
    how = recrawl.add_mutually_exclusive_group()
    how.add_argument("--once", action="store_true", help="one pass over the schedule, then exit")
    how.add_argument(
        "--all", action="store_true", help="queue every tracked URL now (due or not), then exit"
    )
    how.add_argument("--status", action="store_true", help="print the recrawl backlog as JSON")
    body = sub.add_parser("body", help="print a stored page's body (from the body store)")
    body.add_argument("url")
    body.add_argument(
        "--headers", action="store_true",
        help="print status and headers instead (the object format keeps only Content-Type)",
    )  # fmt: skip
    wacz = sub.add_parser("wacz", help="package the crawl's WARC files as one WACZ file")
    wacz.add_argument("--output", required=True, metavar="FILE.wacz", help="the package to write")
    add_budget_parser(sub)
    add_reset_parser(sub)
    migrate_parser = add_dedupe_parser(sub)
    _options_after_the_command([*sub.choices.values(), migrate_parser])
    args = parser.parse_args(argv)
    args.set += getattr(args, "set_after", [])

    settings = get_project_settings()
    for pair in args.set:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            parser.error(f"-s wants NAME=VALUE, not {pair!r}")
        settings.set(name, value, priority="cmdline")
    if args.redis_url:
        settings.set("REDIS_URL", args.redis_url, priority="cmdline")
    try:
        refuse_unreadable(settings)  # a -s value no getter reads: one line, no traceback
        config = FrontierConfig.from_settings(settings)
    except ConfigError as exc:  # one line, as a worker's start says it
        print(f"crawlproject: {exc}", file=sys.stderr)
        return 1
    crawl = args.crawl or crawl_name(None, settings)  # CRAWL_NAME, else "web"
    if args.command == "budget":
        if hosts_need_release(args):
            return 2
        run = partial(budget_command, config, args)
        return _run_with_redis(config, _with_redis(config, crawl, "budget", [], run=run))
    if args.command == "reset":
        crawl = reset_target(args, parser)  # --crawl NAME, never a default
        run = partial(reset_command, config, args)
        reset = _with_redis(config, crawl, "reset", [], run=run)
        return one_line_refusal(partial(_run_with_redis, config, reset))
    if args.command == "dedupe":
        crawl = dedupe_target(args, parser)  # --crawl NAME, never a default
        try:
            dedupe = DedupeConfig.from_settings(settings)
            dedupe.validate()
        except ConfigError as exc:
            print(f"crawlproject: {exc}", file=sys.stderr)
            return 1
        run = partial(dedupe_command, config, dedupe.parts)
        migrating = _with_redis(config, crawl, "dedupe", [], run=run)
        return one_line_refusal(partial(_run_with_redis, config, migrating), MigrateRefused)
    if args.command in ("body", "wacz"):
        # The body store only: its settings and the crawl's name (no crawl has
        # a name like "../x": it would read another directory) are all they
        # check, each mistake one line.
        try:
            store_config = StoreConfig.from_settings(settings)
        except ConfigError as exc:
            print(f"crawlproject {args.command}: {exc}", file=sys.stderr)
            return 1
        if not CRAWL_NAME_RE.match(crawl):
            print(
                f"crawlproject {args.command}: crawl name {crawl!r} must be 1-64 characters "
                "of letters, digits, _ . -",
                file=sys.stderr,
            )
            return 1
        if args.command == "body":
            return print_body(store_config, crawl, args.url, args.headers)
        return wacz_command(store_config, crawl, args.output)
    if args.command == "status":
        if args.watch is not None and args.watch <= 0:
            parser.error("--watch wants a number of seconds > 0")
        serve = None
        if args.serve is not None:
            from crawlproject.status.page import parse_listen

            if args.json:
                parser.error("--serve and --json: choose one (the page serves /status.json)")
            try:
                serve = parse_listen(args.serve)
            except ValueError as exc:
                parser.error(str(exc))
        try:
            defaulted = args.crawl is None and crawl_name_of(None, settings).source == "default"
            status_args = (args.json, args.watch, serve, defaulted)
            return _run_with_redis(
                config, _with_redis(config, crawl, "status", [], status_args=status_args)
            )
        except KeyboardInterrupt:
            return 0
    if args.command == "dead":
        mode = next((h for h in ("explain", "requeue", "drop") if getattr(args, h)), "list")
        run = partial(dead_command, config, settings, args.spider or crawl, mode)
        return _run_with_redis(config, _with_redis(config, crawl, "dead", [], run=run))
    if args.command == "recrawl":
        mode = "status" if args.status else "all" if args.all else "once" if args.once else "run"
        recrawl_config = RecrawlConfig.from_settings(settings)
        return _run_with_redis(config, _with_redis(config, crawl, mode, [], recrawl_config))
    if args.command == "seed":  # one line per URL: queued, already seen, refused (seed_cli.py)
        seeding = SeedRun(config, settings, seed_urls(args, parser))
        return _run_with_redis(config, _with_redis(config, crawl, "seed", [], run=seeding)) or (
            seeding.status
        )
    urls: list[str] = []
    action = args.command
    if getattr(args, "requeue", False):
        action = "requeue" if args.command == "parked" else "requeue-poisoned"
    elif getattr(args, "reasons", False):
        action = "parked-reasons"
    return _run_with_redis(config, _with_redis(config, crawl, action, urls))


def _options_after_the_command(commands: Iterable[argparse.ArgumentParser]) -> None:
    """``--crawl``, ``--redis-url`` and ``-s`` after the command too
    (``crawlproject status --crawl quotes``, as a user writes it), not only
    before it; given after, they win (SUPPRESS: absent, the value before stays)."""
    for command in commands:
        with contextlib.suppress(argparse.ArgumentError):  # reset has its own --crawl
            command.add_argument("--crawl", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        command.add_argument("--redis-url", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        command.add_argument(
            "-s", "--set", dest="set_after", action="append", default=argparse.SUPPRESS,
            metavar="NAME=VALUE", help=argparse.SUPPRESS,
        )  # fmt: skip


def _run_with_redis(config: FrontierConfig, command: Coroutine[Any, Any, int]) -> int:
    """Runs a command; a Redis that cannot be used (down, wrong URL, TLS or
    password refused) is one line on stderr and exit status 1, no traceback."""
    try:
        return asyncio.run(command)
    except RedisError as exc:
        where = redact(config.redis_url, []) if config.redis_url else "the embedded Redis"
        print(f"crawlproject: cannot use Redis at {where}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
