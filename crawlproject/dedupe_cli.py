"""``crawlproject dedupe migrate --crawl NAME``: the crawl's duplicate index
from the one-tag layout (removed in issue 42) to the spread one
(crawlproject/dedupe/migrate.py says what it does, and what a re-run does).

It takes the same settings as the other commands (``--redis-url``, ``-s
CRAWL_DEDUPE_PARTS=...``: the parts of the new index). It refuses while
workers of the crawl are alive, as ``crawlproject reset`` does; each refusal
is one line on stderr, exit status 1.
"""

from __future__ import annotations

import argparse
from typing import Any

from redis.asyncio import Redis

from crawlproject.dedupe.migrate import MigrateRefused, migrate
from crawlproject.frontier.crawl.config import FrontierConfig
from crawlproject.frontier.crawl.fresh_start import workers_line
from crawlproject.frontier.crawl.persist import workers_alive
from crawlproject.frontier.store.keys import CrawlKeys
from crawlproject.reset_cli import add_crawl_option, named_crawl


def add_dedupe_parser(sub: Any) -> argparse.ArgumentParser:
    """The ``dedupe`` subcommand (``migrate``), on the CLI's subparsers; returns
    ``migrate``'s parser."""
    dedupe = sub.add_parser("dedupe", help="the crawl's duplicate index (migrate)")
    how = dedupe.add_subparsers(dest="dedupe_command", required=True)
    migrate_parser = how.add_parser(
        "migrate", help="make a one-tag duplicate index spread (the one layout read now)"
    )
    add_crawl_option(migrate_parser, "dedupe_crawl", "the crawl whose index to migrate")
    return migrate_parser


def dedupe_target(args: argparse.Namespace, parser: argparse.ArgumentParser) -> str:
    """The crawl to migrate: ``--crawl NAME`` after ``migrate`` or before it."""
    usage = "dedupe migrate needs the crawl: crawlproject dedupe migrate --crawl NAME"
    return named_crawl(args, parser, "dedupe_crawl", usage)


async def dedupe_command(config: FrontierConfig, parts: int, redis: Redis, keys: CrawlKeys) -> None:
    """Migrates the crawl's index; one line at the end (MigrateRefused: one line)."""
    alive = await workers_alive(redis, keys, config.lease_ms)
    if alive:
        raise MigrateRefused(f"not migrated: {workers_line(keys.crawl, alive)}")
    print(await migrate(redis, keys, parts))
