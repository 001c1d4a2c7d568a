"""What a user of plain Scrapy runs: Scrapy's defaults, robots.txt obeyed.

Nothing of crawlproject is imported (its venv does not even hold it). The
benchmark passes CONCURRENT_REQUESTS and LOG_LEVEL with ``-s``, the feed with
``-O``.
"""

BOT_NAME = "plainbaseline"
SPIDER_MODULES = ["plainbaseline.spiders"]

ROBOTSTXT_OBEY = True  # as `scrapy startproject` writes it
# CPU-bound: no delay; per-host concurrency stays Scrapy's default (8), which
# only helps this side (the frontier worker fetches one page a host at a time).
DOWNLOAD_DELAY = 0
USER_AGENT = "plainbaseline/0.1 (crawl_rate benchmark)"
TELNETCONSOLE_ENABLED = False
LOG_LEVEL = "INFO"
