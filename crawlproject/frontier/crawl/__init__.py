"""One crawl as a whole: which crawl a spider joins (``crawl_name``), which
Redis it uses (``redis_settings``), the frontier's settings read once
(``config``, ``address_settings``, ``host_overrides``, and ``scrapy_politeness``:
the add-on that takes a user's Scrapy politeness settings as the fleet's),
whether the crawl runs on the frontier at all (``on_frontier``), the crawl's
Redis owned once per worker process (``crawl_redis``), starting over
(``fresh_start``), deleting its keys at the end (``persist``) and the dead
lists (``dead``).

May use: ``store``, ``connection`` and ``basics``.
"""
