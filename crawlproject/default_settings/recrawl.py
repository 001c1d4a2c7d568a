"""Recrawl: per-URL state and the due schedule."""

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
