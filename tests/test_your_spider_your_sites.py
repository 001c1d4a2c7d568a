"""Your spider, your sites (issue 34): one crawl run, every promise its own test.

At the same time, on one real redis-server, with no crawl name given anywhere
(no ``CRAWL_NAME``, no ``-a crawl=``):

* two ``scrapy crawl web`` workers seeded with a documentation site of 1,201
  pages and a blog of 1,200 stable-id articles (hex, UUID, base62), each
  linked once from a prev/next chain of 60 listing pages;
* one worker of a spider written as Scrapy's tutorial teaches
  (tests/spiders_for_tests/shop.py: ``start_urls``, a private callback,
  ``cb_kwargs``, dict items, no errback) on a shop of 1,200 products on a
  prev/next chain of 60 listings, which also link a 404 and a redirect chain
  longer than ``REDIRECT_MAX_TIMES``.

The sites (testkit/own_sites.py) are three loopback hosts; their server's
request log and its live count of requests in flight per host are the judge.
Promised: every page of the three sites fetched exactly once (robots.txt
apart), the chain's hops at most once each, one item per product with its
listing's number, every process ending by itself with exit 0, never more
than one request in flight per host. The delays are 0 (``CRAWL_HOST_DELAY``
and the adaptive delay: loopback), the idle close short (2 s) and
``CRAWL_HOST_BUDGET`` 100 (below); every other setting is the default.

Why 1,201 docs pages are enough: what the docs site shows is that a seed's
host has no budget, i.e. a seed's site larger than any budget it could have
is fetched whole. Before issue 34 a seed's host could queue 10 votes'
worth, 10 x ``CRAWL_HOST_BUDGET`` URLs; the site needs only to be larger than
that, by a fifth as the 12,001 pages were over the default budget's 10,000.
The bound is the budget, so the test sets ``CRAWL_HOST_BUDGET`` to 100 and
the site to 1.2 x 10 x 100 + 1 pages: the same test of the same code, with a
tenth of the pages (the docs site, one request at a time on one host, took
~420-466 s of a CI run at 12,001). A smaller budget takes nothing away from
the others: the blog (1,260 URLs) and the shop (1,263) are seeds' hosts as
well and now exceed 10 x the budget too, the shop more than one vote's (what
it is there to show) by more than before.

Why 1,200 blog articles are enough: the blog was 2,000 (2,100 URLs, the
largest of the three sites, each fetched one request at a time; the fixture
took 106 s of a CI run). What it shows is that stable ids linked once are neither budgeted
nor taken for tokens nor cut by depth: at 60 listings of 20 it is a fifth
over 10 x the budget (as the docs site), each of its three id shapes has 400
new URLs, four times CRAWL_TRAP_TOKEN_URLS (100), and its listing chain is
60 hops, three times CRAWL_MAX_DEPTH (20). Asserted in the fixture.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from testkit.crawlproc import REPO_ROOT, WorkerProcess, start_worker, tail
from testkit.own_sites import (
    BLOG_IP,
    DOCS_IP,
    SHOP_IP,
    BlogSite,
    DocsSite,
    ShopSite,
)
from testkit.own_web import OwnSitesWeb
from testkit.redis_server import RedisServer
from testkit.testweb import RequestRecord, page_counts, politeness_report

# A seed's host has no budget; before issue 34 it had 10 votes, 10 x this. The
# docs site is larger than that by a fifth (module doc): the bound is a setting,
# so it is set low and the site kept small.
HOST_BUDGET = 100
DOCS_PAGES = 12 * HOST_BUDGET + 1
BLOG_LISTINGS = 60  # of 20 articles: 1,260 pages (module doc)
TOKEN_URLS = 100  # CRAWL_TRAP_TOKEN_URLS's default
MAX_DEPTH = 20  # CRAWL_MAX_DEPTH's default
SETTINGS = {
    "CRAWL_HOST_DELAY": 0,  # loopback: no politeness delay, one request per host still
    "CRAWL_HOST_BUDGET": HOST_BUDGET,
    "CRAWL_ADAPTIVE_DELAY_FACTOR": 0,
    "CRAWL_IDLE_CLOSE_SECONDS": 2,
    "CRAWL_IDLE_POLL_SECONDS": 0.2,
    "LOG_LEVEL": "INFO",
}
DEADLINE_SECONDS = 900  # the whole run, at most
# No request to any site for this long while a worker runs: it is not going to
# end by itself (a lease lost by a dead worker is reclaimed after
# CRAWL_LEASE_SECONDS, 30 s, and would bring a request before this).
QUIET_SECONDS = 60
PROBE = re.compile(r"/[0-9a-f]{16}-[0-9a-f]{16}\.html")  # crawlproject/dedupe/soft404.py's
# Log lines that say why a page was not fetched, shown with a failed assertion.
WHY = re.compile(
    r"Trap guard|budget|dead list|max redirections|Unhandled|Traceback| ERROR: |"
    r"cannot be stored|[Pp]arked|[Tt]oken guard|Gave up|Discarding"
)
STAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ")


@dataclass
class FleetRun:
    web: OwnSitesWeb
    docs: DocsSite
    blog: BlogSite
    shop: ShopSite
    procs: dict[str, WorkerProcess]
    ended_by_itself: dict[str, bool]
    seconds: float
    items: list[dict[str, object]] = field(default_factory=list)
    log: list[RequestRecord] = field(default_factory=list)

    def why(self, limit: int = 20) -> str:
        """The log lines of every worker that may tell why a promise failed
        (each message once, with how many times it came)."""
        lines = []
        for tag, proc in self.procs.items():
            text = proc.log_path.read_text(errors="replace").splitlines()
            found = Counter(
                STAMP.sub("", line) for line in text if STAMP.match(line) and WHY.search(line)
            )
            lines += [f"--- {tag} (rc={proc.returncode}, {sum(found.values())} such lines)"]
            lines += [f"{n} x {line}" for line, n in found.most_common(limit)]
        return "\n".join(lines)


def agent(tag: str) -> str:
    """A worker's User-Agent: the server's log tells who fetched what."""
    return f"crawlproject-{tag}"


def ended(procs: dict[str, WorkerProcess], web: OwnSitesWeb) -> dict[str, bool]:
    """Waits for every worker; which ended by itself. A worker still running
    once no site saw a request for QUIET_SECONDS, or at the deadline, did not:
    it is stopped (SIGTERM, then SIGKILL) so the run can be judged."""
    start = time.monotonic()
    while any(p.poll() is None for p in procs.values()):
        last = web.log[-1].end if web.log else time.time()
        if time.time() - last > QUIET_SECONDS or time.monotonic() - start > DEADLINE_SECONDS:
            break
        time.sleep(0.5)
    by_itself = {tag: p.poll() is not None for tag, p in procs.items()}
    for proc in procs.values():
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs.values():
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return by_itself


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FleetRun]:
    tmp = tmp_path_factory.mktemp("your-sites")
    docs, blog, shop = DocsSite(pages_total=DOCS_PAGES), BlogSite(BLOG_LISTINGS), ShopSite()
    assert len(docs.pages()) > 10 * HOST_BUDGET  # more than a seed could queue before issue 34
    assert len(blog.pages()) >= 12 * HOST_BUDGET  # so is the blog, by a fifth
    assert len(blog.articles()) // 3 >= 4 * TOKEN_URLS  # each id shape past the token guard
    assert blog.listings >= 3 * MAX_DEPTH  # a chain deeper than the depth guard
    assert len(shop.pages()) > HOST_BUDGET  # more than a host found by the crawl may queue
    feed = tmp / "products.jsonl"
    with (
        pytest.MonkeyPatch.context() as env,
        RedisServer() as redis,
        OwnSitesWeb({DOCS_IP: docs, BLOG_IP: blog, SHOP_IP: shop}) as web,
    ):
        env.delenv("CRAWL_NAME", raising=False)  # no crawl name given anywhere
        seeds = [web.base_url(DOCS_IP) + "/", web.base_url(BLOG_IP) + "/"]
        start = time.monotonic()
        procs = {
            f"web{i}": start_worker(
                REPO_ROOT,
                redis.url,
                None,
                seeds,
                {**SETTINGS, "USER_AGENT": agent(f"web{i}")},
                tmp / f"web{i}.log",
            )
            for i in range(2)
        }
        procs["shop"] = start_worker(
            REPO_ROOT, redis.url, None, [],
            {**SETTINGS, "SPIDER_MODULES": "spiders,tests.spiders_for_tests",
             "USER_AGENT": agent("shop")},
            tmp / "shop.log",
            extra_args=["-a", f"shop={web.base_url(SHOP_IP)}/", "-O", str(feed)],
            spider="shop",
        )  # fmt: skip
        for proc in procs.values():  # the crawl's name is the project's to choose
            args = [str(arg) for arg in proc.args]
            assert not [a for a in args if a.startswith(("crawl=", "CRAWL_NAME="))], args
        by_itself = ended(procs, web)
        seconds = time.monotonic() - start
        web.write_log(tmp / "requests.jsonl")
        print(f"\nyour spider, your sites: {len(web.log)} requests in {seconds:.1f} s ({tmp})")
        items = (
            [json.loads(line) for line in feed.read_text().splitlines()] if feed.exists() else []
        )
        yield FleetRun(web, docs, blog, shop, procs, by_itself, seconds, items, list(web.log))


def missing_and_doubles(run: FleetRun, ip: str) -> tuple[list[str], dict[str, int]]:
    fetched = page_counts(run.log)
    expected = run.web.page_urls(ip)
    missing = sorted(expected - set(fetched))
    doubles = {u: n for u, n in fetched.items() if u in expected and n > 1}
    return missing, doubles


@pytest.mark.parametrize("ip", [DOCS_IP, BLOG_IP, SHOP_IP], ids=["docs", "blog", "shop"])
def test_every_page_fetched_exactly_once(run: FleetRun, ip: str) -> None:
    missing, doubles = missing_and_doubles(run, ip)
    total = len(run.web.page_urls(ip))
    assert not missing and not doubles, (
        f"{ip}: {len(missing)} of {total} pages never fetched (e.g. {missing[:3]}), "
        f"{len(doubles)} fetched more than once (e.g. {list(doubles.items())[:3]})\n{run.why()}"
    )


def test_nothing_but_pages_robots_and_the_chain_fetched(run: FleetRun) -> None:
    """Besides the pages: each host's robots.txt, once; the chain; and the
    soft-404 probes the crawler may send (a path no site has)."""
    chain = {run.web.url(SHOP_IP, p) for p in run.shop.chain()}
    pages = set().union(*(run.web.page_urls(ip) for ip in (DOCS_IP, BLOG_IP, SHOP_IP)))
    known = pages | chain
    other = [r for r in run.log if r.url not in known and r.path != "/robots.txt"]
    unexplained = [r.url for r in other if not PROBE.fullmatch(r.path)]
    assert not unexplained, unexplained[:10]
    robots = Counter(r.host_ip for r in run.log if r.path == "/robots.txt")
    assert robots == dict.fromkeys((DOCS_IP, BLOG_IP, SHOP_IP), 1), robots


def test_each_spider_fetches_only_its_own_sites(run: FleetRun) -> None:
    """Two spiders on one Redis, no crawl named: each crawls its own (the
    shop's requests, whose callbacks the web spider has not, never reach a
    web worker, and the reverse)."""
    fetched_by = Counter((r.host_ip, r.headers.get("user-agent")) for r in run.log)
    web_agents = {agent("web0"), agent("web1")}
    owners = {DOCS_IP: web_agents, BLOG_IP: web_agents, SHOP_IP: {agent("shop")}}
    wrong = {(ip, ua): n for (ip, ua), n in fetched_by.items() if ua not in owners[ip]}
    assert not wrong, f"requests by the wrong spider: {wrong}\n{run.why()}"
    assert {ua for ip, ua in fetched_by if ip != SHOP_IP} == web_agents  # both web workers worked


def test_redirect_chain_hops_fetched_at_most_once(run: FleetRun) -> None:
    counts = page_counts(run.log)
    hops = [run.web.url(SHOP_IP, p) for p in run.shop.chain()]
    assert counts[hops[0]] == 1, (counts[hops[0]], run.why())  # linked: fetched, once
    assert all(counts[h] <= 1 for h in hops), {h: counts[h] for h in hops if counts[h] > 1}
    assert counts[hops[-1]] == 0, "the chain is longer than REDIRECT_MAX_TIMES: never its end"


def test_one_item_per_product_with_its_listing(run: FleetRun) -> None:
    products = {run.web.url(SHOP_IP, p): k for p, k in run.shop.products().items()}
    per_url = Counter(str(item.get("url")) for item in run.items)
    missing = sorted(set(products) - set(per_url))
    assert not missing, f"{len(missing)} of {len(products)} products without an item\n{run.why()}"
    assert all(per_url[u] == 1 for u in products), {u: n for u, n in per_url.items() if n > 1}
    assert set(per_url) == set(products), set(per_url) - set(products)
    wrong = [i for i in run.items if i["listing"] != products[str(i["url"])]]
    assert not wrong, wrong[:5]  # cb_kwargs came back with each request
    by_url = {str(i["url"]): i for i in run.items}
    for path in list(run.shop.products())[::37]:
        n = run.shop.product_number(path)
        assert n is not None
        item = by_url[run.web.url(SHOP_IP, path)]
        assert (item["name"], item["sku"]) == (run.shop.product_name(n), f"SKU-{n:05d}")


def test_every_process_ends_by_itself_with_exit_0(run: FleetRun) -> None:
    not_ended = [tag for tag, by_itself in run.ended_by_itself.items() if not by_itself]
    codes = {tag: p.returncode for tag, p in run.procs.items()}
    tails = "\n".join(f"--- {tag}:\n{tail(p.log_path, 25)}" for tag, p in run.procs.items())
    assert not not_ended, (
        f"stopped by the test (no request for {QUIET_SECONDS} s): {not_ended}\n{tails}"
    )
    assert all(code == 0 for code in codes.values()), f"exit codes {codes}\n{tails}"


def test_never_more_than_one_request_in_flight_per_host(run: FleetRun) -> None:
    assert set(run.web.peak_in_flight) <= {DOCS_IP, BLOG_IP, SHOP_IP}
    assert all(n <= 1 for n in run.web.peak_in_flight.values()), dict(run.web.peak_in_flight)
    report = politeness_report(run.log, 0.0)
    assert all(p.max_in_flight <= 1 for p in report.values()), report
