"""Fleet status, progress and Prometheus metrics."""

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
