"""``crawlproject budget``: the URLs waiting over their host's budget, and
releasing them (crawlproject/frontier/store/budgets.py; docs/traps.md).

    crawlproject budget                       per host, URLs waiting over its budget (JSON)
    crawlproject budget --release [HOST ...]  moves them into their hosts' queues, in
                                              order, each once (every host, or those named)

A host's budget stays for its later URLs: to lift it, seed the host
(``crawlproject seed``), put it in the crawl's scope, or raise
``CRAWL_HOST_BUDGET`` (the next worker start lets in what then fits).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from redis.asyncio import Redis

from crawlproject.frontier.crawl.config import FrontierConfig
from crawlproject.frontier.store.keys import CrawlKeys
from crawlproject.frontier.store.redis_frontier import RedisFrontier


def add_budget_parser(sub: Any) -> None:
    """The ``budget`` subcommand, on the CLI's subparsers."""
    budget = sub.add_parser("budget", help="URLs waiting over their host's budget, per host")
    budget.add_argument(
        "--release", action="store_true",
        help="move them into their hosts' queues (every host, or the HOSTs named)",
    )  # fmt: skip
    budget.add_argument("hosts", nargs="*", metavar="HOST", help="politeness keys, as listed")


def hosts_need_release(args: argparse.Namespace) -> bool:
    """HOST names given without --release (said on stderr: usage, exit 2)."""
    if args.hosts and not args.release:
        print("crawlproject: HOST names go with --release", file=sys.stderr)
        return True
    return False


async def budget_command(
    config: FrontierConfig, args: argparse.Namespace, redis: Redis, keys: CrawlKeys
) -> None:
    """Lists (or with ``--release`` releases) the URLs waiting over budget."""
    frontier = RedisFrontier(
        redis, keys, config.host_delay_ms, config.host_concurrency, config.lease_ms,
        budget=config.budget, seen=config.seen,
    )  # fmt: skip
    waiting = await frontier.over_budget_by_host()
    if not args.release:
        print(json.dumps(waiting, sort_keys=True))
        return
    released = await frontier.release_over_budget(args.hosts or None)
    print(f"released {released} URL(s) that waited over their host's budget")
    missing = [h for h in args.hosts if h not in waiting]
    if missing:
        print(f"nothing waited for: {', '.join(missing)}")
