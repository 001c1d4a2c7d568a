"""robots.txt (RFC 9309)."""

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
# robots.txt answered 5xx/429 or not at all (a name that does not resolve, a
# refused connection, a timeout): the host is treated as fully disallowed and
# its robots.txt retried after this, doubling each time up to the max (a
# Retry-After header counts too, capped by the max). Short: a host that cannot
# answer must not hold a crawl's end: tried at 0, 2 and 6 s by default, so a
# host found by a crawl's last page is set aside within its idle close.
CRAWL_ROBOTS_RETRY_SECONDS = 2.0
CRAWL_ROBOTS_RETRY_MAX_SECONDS = 60.0
# Meanwhile a URL of such a host goes back to its queue until robots.txt failed
# this many times in a row; then the host is set aside (its URLs parked, with
# the reason: crawlproject parked --reasons; --requeue tries it again), so a
# finite crawl can end.
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
