"""``crawlproject budget``: the URLs waiting over their host's budget, and
releasing them (crawlproject/frontier/budgets.py; docs/traps.md).

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

from crawlproject.frontier.client import RedisFrontier
from crawlproject.frontier.config import FrontierConfig
from crawlproject.frontier.embedded import EmbeddedRedis
from crawlproject.frontier.outage import command_client

CLI_CLIENT_ID = "cli"


def add_budget_parser(sub: Any) -> None:
    """The ``budget`` subcommand, on the CLI's subparsers."""
    budget = sub.add_parser("budget", help="URLs waiting over their host's budget, per host")
    budget.add_argument(
        "--release", action="store_true",
        help="move them into their hosts' queues (every host, or the HOSTs named)",
    )  # fmt: skip
    budget.add_argument("hosts", nargs="*", metavar="HOST", help="politeness keys, as listed")


async def run_budget(config: FrontierConfig, crawl: str, args: argparse.Namespace) -> int:
    if args.hosts and not args.release:
        print("crawlproject: HOST names go with --release", file=sys.stderr)
        return 2
    embedded = None
    if config.redis_url is None:
        embedded = EmbeddedRedis(config.data_dir)
        redis = await embedded.connect(client_name=CLI_CLIENT_ID)
    else:
        redis = command_client(config.redis_url)
    try:
        frontier = RedisFrontier(
            redis, config.crawl_keys(crawl), config.host_delay_ms, config.host_concurrency,
            config.lease_ms, budget=config.budget, seen=config.seen,
        )  # fmt: skip
        waiting = await frontier.over_budget_by_host()
        if not args.release:
            print(json.dumps(waiting, sort_keys=True))
            return 0
        hosts = args.hosts or None
        released = await frontier.release_over_budget(hosts)
        print(f"released {released} URL(s) that waited over their host's budget")
        missing = [h for h in args.hosts if h not in waiting]
        if missing:
            print(f"nothing waited for: {', '.join(missing)}")
        return 0
    finally:
        if embedded is None:
            await redis.aclose()
        else:
            await embedded.leave(redis, CLI_CLIENT_ID)
