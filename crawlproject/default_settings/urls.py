"""Which URLs are queued: spider-trap guards and budgets, URL rules,
path-ascending discovery and the links taken per page."""

# (private: `from ... import *` must not copy it into the settings)
from scrapy.linkextractors import IGNORED_EXTENSIONS as _SCRAPY_IGNORED_EXTENSIONS

# Spider-trap guards, each counted (trap/<guard>) and logged once per host.
# Links more than this many hops from the last page that brought new content
# (crawlproject/frontier/admission/depth_chains.py: not a duplicate of a page of its own host,
# not thin) are not queued: pagination is followed to its end, a calendar or an
# empty archive is not (0: no limit).
CRAWL_MAX_DEPTH = 20
# URLs queued per host (politeness key) over the whole crawl (0: no limit).
CRAWL_MAX_PAGES_PER_HOST = 0
# URLs with a query string queued per host and URL shape (path with digits
# masked + parameter names; rules/traps.py): bounds calendars and session ids
# minted per render (0: no limit). A forum's /thread?id=N counts as one shape:
# raise it for sites like that (CRAWL_HOST_OVERRIDES does not apply here).
CRAWL_MAX_URLS_PER_PATTERN = 10_000
# Budgets from reputation (IRLbot's BEAST), for the hosts a crawl finds by
# itself: a host may queue CRAWL_HOST_BUDGET URLs for each vote it has: its
# own, one per distinct other registered domain that links to it (up to 255;
# with 256 it has no budget). URLs over the budget wait in the host's
# overflow, in order, and go in as votes arrive or the budget is raised; a
# host nobody links to cannot take the crawl, a well-linked site is never cut
# short. The operator's hosts (a seed's; every host of scope hosts or domains,
# or of a spider's allowed_domains) have no budget, unless
# CRAWL_HOST_BUDGET_SEED_VOTES > 0 gives them that many votes more than their
# own. 0 turns budgets off; CRAWL_MAX_PAGES_PER_HOST stays a hard cap.
CRAWL_HOST_BUDGET = 1000
CRAWL_HOST_BUDGET_SEED_VOTES = 0
# Tokens minted per render (a session id in the path or query, new on every
# page): once CRAWL_TRAP_TOKEN_URLS new URLs of one token shape of a host
# (rules/traps.py token_shape) have been seen, fewer than
# CRAWL_TRAP_TOKEN_REPEAT_RATE of that shape's links repeated a URL seen
# before, and its pages show minted ids (mostly copies of the host's pages,
# or ids found on pages of the shape; no page judged: past 100 x
# CRAWL_TRAP_TOKEN_URLS), the shape is contained: its URLs are parked (stat
# trap/token_parked; crawlproject parked --reasons). 0 turns it off. Stable
# ids linked once (a listing's articles) are not (docs/traps.md).
CRAWL_TRAP_TOKEN_URLS = 100
CRAWL_TRAP_TOKEN_REPEAT_RATE = 0.02

# URL rules (crawlproject/rules/url_rules.py), applied to every URL before the
# seen-URL test: a refused URL is counted (stat rules/<reason>) and never queued.
# Host patterns: "example.com" is that host; ".example.com" it and its subdomains.
CRAWL_ALLOWED_SCHEMES: list[str] = ["http", "https"]
CRAWL_ALLOW_HOSTS: list[str] = []  # empty: every host (the spider's scope still applies)
# Scrapy's allowed_domains rule: "example.com" allows it and all its subdomains
# (as ".example.com" in CRAWL_ALLOW_HOSTS). With both set, a host matching either passes.
CRAWL_ALLOW_DOMAINS: list[str] = []
CRAWL_DENY_HOSTS: list[str] = []
CRAWL_DENY_HOSTS_FILE: str | None = None  # a blocklist: one host pattern per line, # comments
CRAWL_DENY_PATH_PREFIXES: list[str] = []
CRAWL_ALLOW_URL_REGEXES: list[str] = []  # if set, a URL must match one
CRAWL_DENY_URL_REGEXES: list[str] = []
CRAWL_MAX_URL_LENGTH = 2048  # characters of the canonical URL; 0: no limit
CRAWL_MAX_QUERY_PARAMS = 20  # 0: no limit
# Never fetched: Scrapy's list of binary and media file extensions, less those
# a content processor reads (PDF, RSS feeds: CRAWL_CONTENT_PROCESSORS_BASE).
CRAWL_DENY_EXTENSIONS: list[str] = [
    e for e in _SCRAPY_IGNORED_EXTENSIONS if e not in ("pdf", "rss")
]
# Extra rules: classes with from_settings(settings) and check(url) -> reason | None.
CRAWL_URL_RULES: list[str] = []

# Spider traps (crawlproject/rules/traps.py). A URL whose path repeats a block of
# 1-3 segments more than this many times in a row (/a/b/a/b/a/b/a/b/: a/b repeats
# 3 times), or has one segment more than this + 2 times anywhere, is refused
# (stat rules/path_repeats; logged once per host). 0: off.
CRAWL_MAX_PATH_REPEATS = 2
# Path-ascending discovery (middlewares/path_ascending.py): for each page
# http://h/a/b/page.html also queue http://h/a/b/, http://h/a/ and http://h/,
# at the page's depth + 1, in the spider's scope. Off by default.
CRAWL_PATH_ASCENDING = False

# Links taken from one page at most, in document order; the rest are dropped
# (stat limits/links_truncated, one log line per host). Real navigation-heavy
# pages (news front pages, category listings) have a few hundred links; a page
# of thousands is a link farm or a generated trap, and each link costs a
# canonicalization, a seen test and frontier space. 0: no limit. (Scrapy's own
# download limits stay Scrapy settings: DOWNLOAD_MAXSIZE, DOWNLOAD_WARNSIZE,
# DOWNLOAD_TIMEOUT, REDIRECT_MAX_TIMES, set in crawlproject/settings.py; the
# outcomes are listed in crawlproject/limits.py.)
CRAWL_MAX_LINKS_PER_PAGE = 1000
