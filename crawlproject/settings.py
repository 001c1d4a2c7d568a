"""Scrapy project settings for crawlproject (``scrapy crawl web``).

``CRAWL_*`` defaults live in :mod:`crawlproject.default_settings`; this module
wires the components into Scrapy and turns off what would fight the frontier.
"""

import os

from crawlproject.default_settings import *  # noqa: F403
from crawlproject.frontier.crawl.redis_settings import environment_values

# REDIS_URL, CRAWL_NAME and CRAWL_DATA_DIR from the environment, as containers
# and process managers pass them; any other setting (-s, a spider's, Scrapyd's)
# wins over these. The worker logs which source it used.
globals().update(environment_values(os.environ))

BOT_NAME = "crawlproject"
SPIDER_MODULES = ["spiders"]
NEWSPIDER_MODULE = "spiders"
# `scrapy crawl` that exits 1 when the worker's frontier failed.
COMMANDS_MODULE = "crawlproject.commands"

# The robots token "crawlproject" leads the User-Agent header.
USER_AGENT = "crawlproject/0.1 (+polite distributed crawler; robots token: crawlproject)"

# The shared Redis frontier replaces Scrapy's scheduler and its dupefilter.
SCHEDULER = "crawlproject.frontier.scheduler.FrontierScheduler"
DUPEFILTER_CLASS = "scrapy.dupefilters.BaseDupeFilter"

# Politeness is enforced fleet-wide by the frontier. Scrapy's own per-process
# delay and per-domain cap would apply a second time on top of it.
DOWNLOAD_DELAY = 0
AUTOTHROTTLE_ENABLED = False
CONCURRENT_REQUESTS = 32
CONCURRENT_REQUESTS_PER_DOMAIN = 32
# A spider's own DOWNLOAD_DELAY, CONCURRENT_REQUESTS_PER_DOMAIN, AUTOTHROTTLE_*
# and DOWNLOAD_SLOTS (custom_settings, -s, download_delay attribute) are taken
# as the fleet's CRAWL_HOST_* settings instead (docs/settings.md).
ADDONS = {
    "crawlproject.frontier.scrapy_politeness.ScrapyPoliteness": 0,
    # Rendering (CRAWL_RENDER*): scrapy-playwright's launch options from
    # CRAWL_BROWSER_PATH; a spider's scrapy-playwright handler becomes ours.
    "crawlproject.render.addon.RenderAddon": 10,
}
# Limits on one fetch (outcomes and their stats: crawlproject/limits.py).
# Scrapy's 180 s timeout lets one dead-slow host hold its politeness slot for
# minutes; 30 s is plenty for a page, and RetryMiddleware still tries it again.
DOWNLOAD_TIMEOUT = 30
# Scrapy's 1 GiB limit (also applied to the decompressed body: a gzip bomb
# stops there) is no page's size; 10 MiB keeps real large pages and PDFs, and
# bounds what one answer costs a worker's memory. Warn from 2 MiB (Scrapy: 32 MiB).
DOWNLOAD_MAXSIZE = 10 * 1024 * 1024
DOWNLOAD_WARNSIZE = 2 * 1024 * 1024
# Scrapy follows 20 redirects; real chains are 1-3 (http -> https -> www ->
# page). 5, like Heritrix's default, ends chains that only burn fetches.
REDIRECT_MAX_TIMES = 5
# URL length: the frontier's CRAWL_MAX_URL_LENGTH (rules/url_too_long) covers
# every URL it is given (links, seeds, sitemaps, redirects); Scrapy's
# UrlLengthMiddleware would only cover links, and logs each one in full.
URLLENGTH_LIMIT = 0
# Scrapy 2.19 starts CONCURRENT_ITEMS tasks per response, which wait until the
# response's whole output is through the spider middlewares; the duplicate
# filter holds a page's output for its batched verdict, so each task costs
# wake-ups for nothing: a page yields one item and, once the links a worker
# took before are dropped (middlewares/known_links.py), a link or two. At 100
# (Scrapy's default) they took 15-17 % of a worker's CPU, at 16 still 7 %
# against 2 (bench/crawl_rate.py, BENCHMARKS.md); plain Scrapy is no faster
# with 16 than with 2.
CONCURRENT_ITEMS = 2

# Acknowledge a leased URL only once its outcome (and the links it produced)
# reached the frontier: the spider middleware sits next to the engine (lowest
# order), the downloader middleware too, so each sees the final outcome.
SPIDER_MIDDLEWARES = {
    # Requests that ask for a render (meta playwright_page_methods) stored as
    # data, live objects dropped: the closest to the spider.
    "middlewares.render.RenderRequestsMiddleware": 990,
    "middlewares.frontier_ack.FrontierAckSpiderMiddleware": 10,
    # AOPIC (CRAWL_PRIORITY_POLICY = "aopic"): shares a page's credit among the
    # links that remain after every other spider middleware.
    "middlewares.aopic.AopicCreditMiddleware": 20,
    # Records each fetch's outcome for recrawl (CRAWL_RECRAWL_TRACK or
    # -a mode=continuous); below the duplicate filter, which annotates first.
    "middlewares.recrawl.RecrawlSpiderMiddleware": 30,
    # Judges each page against the fleet's duplicate index before its links
    # leave (CRAWL_DEDUPE_*); the pipeline below drops what it marks.
    "middlewares.dedupe.DedupeSpiderMiddleware": 500,
    # Path-ascending discovery (CRAWL_PATH_ASCENDING): above DepthMiddleware
    # (900), so its requests get depth, Referer, dedupe and ack like links.
    "middlewares.path_ascending.PathAscendingSpiderMiddleware": 950,
    # Drops links this worker sent to the frontier before, by their exact
    # string, before the middlewares below and the engine spend time on them
    # (most links repeat): the closest to the spider.
    "middlewares.known_links.KnownLinksMiddleware": 970,
    # Drops the new links robots.txt forbids by this worker's cached rules (a page's own
    # host's always are): such a URL never takes its host's slot to be refused.
    "middlewares.robots_links.RobotsLinksMiddleware": 965,
    # Notes the host each link was found on: links from other registered
    # domains are votes that grow a host's page budget (CRAWL_HOST_BUDGET).
    "middlewares.link_source.LinkSourceMiddleware": 960,
}
ITEM_PIPELINES = {
    # Page bodies as WARC (CRAWL_STORE_*), before the duplicate filter drops a
    # copy's fetch record: the archive keeps every response (a near copy whole,
    # an exact one as a revisit record: docs/storage.md).
    "pipelines.store.BodyStorePipeline": 50,
    "pipelines.dedupe.DedupePipeline": 100,
}
# robots.txt: the fleet-wide middleware (CRAWL_ROBOTS_*) takes the place of
# Scrapy's, which fetches outside the scheduler (outside the fleet's
# politeness) and caches per process without expiry; ROBOTSTXT_OBEY stays off.
DOWNLOADER_MIDDLEWARES = {
    "middlewares.frontier_ack.FrontierAckDownloaderMiddleware": 10,
    # The private-address guard (CRAWL_GUARD_*): refuses loopback, private,
    # link-local... addresses before robots.txt (100) and any download; the
    # second keeps RetryMiddleware (550) from retrying a refused lookup.
    "middlewares.guard.AddressGuardMiddleware": 50,
    "middlewares.guard.BlockedLookupMiddleware": 560,
    # Behind a proxy the proxy resolves the URL's host: this one resolves it
    # here and applies the guard, after HttpProxyMiddleware (750) sets the proxy.
    "middlewares.guard.ProxiedHostGuardMiddleware": 760,
    # Conditional refetches and failed fetches for recrawl; above the ack
    # middleware, so it sees a final failure before its lease is acked.
    "middlewares.recrawl.RecrawlDownloaderMiddleware": 20,
    "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
    "middlewares.robotstxt.RobotsTxtMiddleware": 100,
    # On a worker without a browser, a page that must be rendered goes back to
    # the frontier for a worker with one, unfetched: after robots.txt (100),
    # before any download (docs/rendering.md).
    "middlewares.render_hand_back.RenderHandBackMiddleware": 150,
    # Parks the queue of a host whose name does not exist (CRAWL_DNS_PARK_AFTER).
    # Below RetryMiddleware (550): exceptions pass from high to low order and a
    # retry stops them, so it sees a failure only once retries gave up.
    "middlewares.dns.DnsFailureMiddleware": 540,
    # Notes the body's Content-Encoding before HttpCompressionMiddleware (590)
    # decodes it and drops the header, so the WARC record still says it.
    "middlewares.wire_encoding.WireEncodingMiddleware": 595,
    # Keeps each 3xx that RedirectMiddleware (600) will follow in the next
    # request's meta, so the WARC file archives it (CRAWL_STORE_*); below the
    # loop check (610), so a looping redirect is not kept.
    "middlewares.redirect_hops.RedirectHopsMiddleware": 605,
    # Stops a redirect loop at its first repeat (above RedirectMiddleware, 600,
    # which would follow it first) and lets sitemaps be larger than pages.
    "middlewares.limits.LimitsMiddleware": 610,
}
# http(s) downloads: fetched by Scrapy's HTTP/1.1 client, then rendered in
# the system's Chromium through scrapy-playwright only where needed
# (CRAWL_RENDER, docs/rendering.md).
DOWNLOAD_HANDLERS = {
    "http": "middlewares.render_handler.RenderDownloadHandler",
    "https": "middlewares.render_handler.RenderDownloadHandler",
}
# DNS: a large expiring cache that also remembers failures (CRAWL_DNS_*);
# Scrapy's keeps 10,000 names for ever and forgets failures.
TWISTED_DNS_RESOLVER = "crawlproject.dns.resolver.CachingResolver"
ROBOTSTXT_OBEY = False

EXTENSIONS = {
    # Masks secrets (AWS keys, passwords in URLs, ...) in every log line; built
    # before Scrapy logs the overridden settings.
    "crawlproject.security.redaction.SecretRedaction": 0,
    # The worker's share of `crawlproject status`: counters and gauges in the
    # crawl's Redis, optional Prometheus metrics, a live progress line.
    "crawlproject.status.reporter.StatusReporter": 500,
    # A SIGTERM while the spider opens closes it once open (Scrapy's stop then
    # does nothing and the process would end with the spider never closed).
    "crawlproject.late_stop.LateStop": 510,
}

# Nothing that can run code is exposed by default.
TELNETCONSOLE_ENABLED = False
REMOTE_CONTROL_ENABLED = False

LOG_LEVEL = "INFO"
