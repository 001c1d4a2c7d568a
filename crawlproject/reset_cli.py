"""``crawlproject reset --crawl NAME [--yes]``: start a crawl over.

Deletes every key of one crawl (crawlproject/frontier/crawl/persist.py's
``delete_crawl``: its queues on every shard, the seen set, the duplicate index,
robots and recrawl state, counters, workers, the seed list; on every master of
a Redis Cluster), so the next ``scrapy crawl`` of that name starts from its
seeds as if new. Other crawls in the same Redis are not touched.

It asks first (``y`` on stdin) unless ``--yes``; without a terminal to ask on
and without ``--yes`` it refuses. It refuses while workers of the crawl are
alive (crawlproject/frontier/crawl/fresh_start.py): stop them first. Each refusal is
one line on stderr, exit status 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from redis.asyncio import Redis

from crawlproject.frontier.crawl.config import FrontierConfig
from crawlproject.frontier.crawl.fresh_start import workers_line
from crawlproject.frontier.crawl.persist import delete_crawl, workers_alive
from crawlproject.frontier.store.keys import CRAWL_NAME_RE, CrawlKeys


class ResetRefused(Exception):
    """One line for stderr: why the crawl was not deleted."""


def add_reset_parser(sub: Any) -> None:
    """The ``reset`` subcommand, on the CLI's subparsers."""
    reset = sub.add_parser(
        "reset", help="delete every key of one crawl (asks first) so it starts over"
    )
    add_crawl_option(reset, "reset_crawl", "the crawl to delete")
    reset.add_argument("--yes", action="store_true", help="do not ask")


def add_crawl_option(command: argparse.ArgumentParser, dest: str, what: str) -> None:
    """``--crawl NAME`` on a command that takes no default crawl (``named_crawl``)."""
    command.add_argument(
        "--crawl", dest=dest, metavar="NAME", help=f"{what} (required: here or before the command)"
    )


def named_crawl(
    args: argparse.Namespace, parser: argparse.ArgumentParser, dest: str, usage: str
) -> str:
    """The crawl a command acts on: ``--crawl NAME`` after the command (``dest``)
    or before it; never a default (usage error, exit 2, without one)."""
    crawl = getattr(args, dest, None) or args.crawl
    if not crawl:
        parser.error(usage)
    if not CRAWL_NAME_RE.match(crawl):
        parser.error(f"--crawl {crawl!r}: a crawl name is 1-64 letters, digits, _ . -")
    return str(crawl)


def reset_target(args: argparse.Namespace, parser: argparse.ArgumentParser) -> str:
    """The crawl to reset: ``--crawl NAME`` after ``reset`` or before it."""
    usage = "reset needs the crawl to delete: crawlproject reset --crawl NAME"
    return named_crawl(args, parser, "reset_crawl", usage)


async def reset_command(
    config: FrontierConfig, args: argparse.Namespace, redis: Redis, keys: CrawlKeys
) -> None:
    """Deletes crawl ``keys.crawl`` after the checks of the module docstring."""
    crawl = keys.crawl
    await _no_workers(config, redis, keys)
    if not args.yes:
        if not sys.stdin.isatty():
            raise ResetRefused(
                f"not reset: no terminal to ask on; to delete crawl {crawl!r}, run "
                f"crawlproject reset --crawl {crawl} --yes"
            )
        answer = input(
            f"Delete every key of crawl {crawl!r} (queues, seen URLs, duplicate index, "
            f"robots and recrawl state, seed list {keys.start_urls!r})? [y/N] "
        )
        if answer.strip().lower() not in ("y", "yes"):
            print(f"crawl {crawl!r} kept")
            return
        await _no_workers(config, redis, keys)  # one may have started while we asked
    deleted = await delete_crawl(redis, keys)
    if deleted:
        print(f"crawl {crawl!r} reset: deleted {deleted} key(s)")
    else:
        print(f"crawl {crawl!r} has no keys in this Redis: nothing to delete")


async def _no_workers(config: FrontierConfig, redis: Redis, keys: CrawlKeys) -> None:
    alive = await workers_alive(redis, keys, config.lease_ms)
    if alive:
        raise ResetRefused(f"not reset: {workers_line(keys.crawl, alive)}")


def one_line_refusal(run: Callable[[], int], refusal: type[Exception] = ResetRefused) -> int:
    """Runs the command; a refusal is one line on stderr and exit status 1."""
    try:
        return run()
    except refusal as exc:
        print(f"crawlproject: {exc}", file=sys.stderr)
        return 1
