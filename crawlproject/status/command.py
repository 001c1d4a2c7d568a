"""``crawlproject status``: which crawl to show, and showing it once or every S seconds.

Without ``--crawl`` (nor ``CRAWL_NAME``) the command looks at ``web``. A
user's own spider crawls under its own name (crawlproject/frontier/crawl/crawl_name.py),
so where ``web`` has nothing the command looks for the crawls that Redis
holds (each has its ``cp:{NAME}:meta``, crawlproject/frontier/store/keys.py: a
bounded SCAN, on every master of a cluster) and shows the only one, or lists
them with how to choose (``--crawl NAME``); ``--json`` says the same as JSON.

``--watch S`` refreshes in place on a terminal (rich's Live); into a pipe or a
file, where Live would print nothing until the end, it prints a fresh table
(or one JSON line) every S seconds, flushed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import signal
import sys
from typing import TYPE_CHECKING, Any

from crawlproject.status.view import collect_status, render

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from crawlproject.frontier.crawl.config import FrontierConfig
    from crawlproject.frontier.store.keys import CrawlKeys

LOG_FORMAT = "%(asctime)s [%(name)s] %(levelname)s: %(message)s"  # as Scrapy's
# Every crawl writes its layout in cp:{NAME}:meta when its first worker starts.
CRAWL_META_PATTERN = "cp:{*}:meta"
CRAWL_META_RE = re.compile(rb"^cp:\{([A-Za-z0-9_.-]{1,64})\}:meta$")
SCAN_COUNT = 1000  # keys per SCAN call
MAX_CRAWLS = 50  # a Redis holding more is listed in part
SCAN_SECONDS = 5.0  # a huge keyspace is searched in part, never for ever
CHOOSE_HINT = "crawlproject status --crawl NAME"


async def crawls_in(redis: Redis) -> tuple[list[str], bool]:
    """The crawls ``redis`` holds (sorted), and whether the search was cut
    short (more than MAX_CRAWLS, or SCAN_SECONDS spent)."""
    found: set[str] = set()

    async def scan() -> bool:
        async for key in redis.scan_iter(match=CRAWL_META_PATTERN, count=SCAN_COUNT):
            name = CRAWL_META_RE.match(key if isinstance(key, bytes) else key.encode())
            if name is not None:
                found.add(name.group(1).decode())
                if len(found) > MAX_CRAWLS:
                    return True
        return False

    try:
        cut = await asyncio.wait_for(scan(), SCAN_SECONDS)
    except TimeoutError:
        cut = True
    return sorted(found)[:MAX_CRAWLS], cut


async def has_crawl(redis: Redis, keys: CrawlKeys) -> bool:
    """Whether crawl ``keys.crawl`` has anything: its layout (a worker started
    it) or seeds waiting in its start list."""
    return bool(await redis.exists(keys.meta, keys.start_urls))


async def status_command(
    config: FrontierConfig,
    redis: Redis,
    keys: CrawlKeys,
    as_json: bool,
    watch: float | None,
    serve: tuple[str, int] | None = None,
    defaulted: bool = False,
) -> None:
    """The command itself; ``keys``: the crawl named (``web`` when
    ``defaulted``: neither ``--crawl`` nor ``CRAWL_NAME`` given)."""
    if serve is not None:
        from crawlproject.status.page import REFRESH_SECONDS, serve_page

        logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)

        async def read() -> dict[str, Any]:
            # The crawl's shard count read with each status, not once at
            # start: the page serves (503s) while Redis is away.
            crawl_keys = await config.open_keys(redis, keys.crawl, adopt=True)
            return await collect_status(redis, crawl_keys, config.lease_ms)

        await serve_page(read, *serve, watch or REFRESH_SECONDS)
        return
    note = None
    if defaulted and not await has_crawl(redis, keys):
        crawls, cut = await crawls_in(redis)
        if len(crawls) > 1 or cut:
            _list_crawls(keys.crawl, crawls, cut, as_json)
            return
        if crawls:
            note = (
                f"crawl {crawls[0]!r}, the only one in this Redis (crawl {keys.crawl!r} "
                f"has nothing; {CHOOSE_HINT} to choose)"
            )
            keys = await config.open_keys(redis, crawls[0], adopt=True)
    await _show(config, redis, keys, as_json, watch, note)


def _list_crawls(looked_for: str, crawls: list[str], cut: bool, as_json: bool) -> None:
    if as_json:
        listing = {"crawl": None, "crawls": crawls, "more": cut, "hint": CHOOSE_HINT}
        print(json.dumps(listing, sort_keys=True), flush=True)
        return
    more = " and more (the search stopped there)" if cut else ""
    print(f"crawl {looked_for!r} has nothing in this Redis; its crawls: {', '.join(crawls)}{more}")
    print(f"choose one: {CHOOSE_HINT}", flush=True)


async def _show(
    config: FrontierConfig,
    redis: Redis,
    keys: CrawlKeys,
    as_json: bool,
    watch: float | None,
    note: str | None,
) -> None:
    # ^C (or SIGTERM) ends a watch between two refreshes: a stop event, not the
    # cancellation asyncio.run sends, which a read in flight may swallow (seen:
    # about 1 in 10 early ^Cs left the watch running).
    stop = _stop_on_signals() if watch is not None else asyncio.Event()
    if as_json:
        while True:
            status = await collect_status(redis, keys, config.lease_ms)
            if note is not None:
                status["crawl_chosen"] = note
            print(json.dumps(status, sort_keys=True), flush=True)
            if watch is None or await _stopped_within(watch, stop):
                return
    from rich.console import Console

    console = Console()
    if note is not None:
        print(note, flush=True)  # one line, never wrapped
    status = await collect_status(redis, keys, config.lease_ms)
    if watch is not None and console.is_terminal:
        from rich.live import Live

        with Live(render(status), console=console, refresh_per_second=4) as live:
            while not await _stopped_within(watch, stop):
                live.update(render(await collect_status(redis, keys, config.lease_ms)))
        return
    while True:  # once; with --watch into a pipe or a file, a table every S seconds
        console.print(render(status))
        sys.stdout.flush()
        if watch is None or await _stopped_within(watch, stop):
            return
        status = await collect_status(redis, keys, config.lease_ms)


def _stop_on_signals() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def _stopped_within(seconds: float, stop: asyncio.Event) -> bool:
    """Waits ``seconds`` or until ``stop`` is set; whether it is set."""
    waiter = asyncio.ensure_future(stop.wait())
    done, _ = await asyncio.wait({waiter}, timeout=seconds)
    if not done:
        waiter.cancel()
    return stop.is_set()
