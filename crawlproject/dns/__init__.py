"""DNS for a whole-web crawl: a resolver with a large, expiring cache that also
remembers failures (``crawlproject.dns.resolver``).

The downloader middleware that parks the queue of a host whose name does not
resolve is ``middlewares/dns.py``.
"""
