"""The frontier as Scrapy sees it: the scheduler Scrapy runs
(``scheduler.FrontierScheduler``), how components find it, the add-ons that
take a Scrapy user's politeness and scheduling settings, scrapy-redis
spiders, Scrapy's private engine hooks (``engine_hooks``, the only module that
touches them), and a worker's start, idle time, end and shutdown.

May use: every other room of the frontier.
"""
