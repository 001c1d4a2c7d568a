"""A Request subclass in a module no spider imports (CRAWL_REQUEST_CLASSES test)."""

from scrapy import Request


class LazyRequest(Request):
    pass
