"""``ADDONS = {"crawlproject.frontier.scrapy_politeness.ScrapyPoliteness": 0}``:
the documented path of the add-on, kept working; the module is
:mod:`crawlproject.frontier.crawl.scrapy_politeness`."""

from crawlproject.frontier.crawl.scrapy_politeness import ScrapyPoliteness

__all__ = ["ScrapyPoliteness"]
