"""Stock scrapy-redis 0.9.1 settings: shared Redis queue and dupefilter, no frontier.

Nothing of crawlproject's settings is imported: this is what a user of stock
scrapy-redis would run. The benchmark passes REDIS_URL, DOWNLOAD_DELAY and
CONCURRENT_REQUESTS with ``-s``.
"""

BOT_NAME = "redisbaseline"
SPIDER_MODULES = ["redisbaseline.spiders"]

SCHEDULER = "scrapy_redis.scheduler.Scheduler"
DUPEFILTER_CLASS = "scrapy_redis.dupefilter.RFPDupeFilter"
# False would make the first worker that closes flush the shared queue and
# dupefilter under the others (see /work/shared/notes).
SCHEDULER_PERSIST = True
# >0 blocks the reactor in BRPOP: never.
SCHEDULER_IDLE_BEFORE_CLOSE = 0

REDIS_URL = "redis://127.0.0.1:6379/0"

# Scrapy's per-process politeness: all scrapy-redis has.
DOWNLOAD_DELAY = 1.0
DOWNLOAD_DELAY_JITTER = 0  # start-to-start exactly 1.0 s (RANDOMIZE_DOWNLOAD_DELAY is deprecated)
CONCURRENT_REQUESTS_PER_DOMAIN = 1
AUTOTHROTTLE_ENABLED = False
DOWNLOAD_TIMEOUT = 30

USER_AGENT = "redisbaseline/0.1 (crawl_rate benchmark)"
ROBOTSTXT_OBEY = False  # as in crawlproject's settings: same requests on the wire
TELNETCONSOLE_ENABLED = False
REMOTE_CONTROL_ENABLED = False
LOG_LEVEL = "INFO"

# Seconds the shared queue must stay empty, with no worker having received a
# response meanwhile, before an idle worker closes (see spiders.RedisWebSpider).
BASELINE_IDLE_CLOSE_SECONDS = 3.0
