"""Spiders written for scrapy-redis, as its README writes them: start URLs
pushed to ``redis_key``, nothing else changed (tests/test_scrapy_redis_spiders.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from scrapy.http import Response
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import Rule
from scrapy_redis.spiders import RedisCrawlSpider, RedisSpider


class MySpider(RedisSpider):
    """scrapy-redis's README ``RedisSpider`` (``parse`` follows every link)."""

    name = "myspider"
    redis_key = "myspider:start_urls"

    def parse(self, response: Response) -> Iterator[Any]:
        yield {"url": response.url, "title": response.css("title::text").get()}
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, callback=self.parse)


class MyCrawler(RedisCrawlSpider):
    """scrapy-redis's README ``RedisCrawlSpider`` (Rules)."""

    name = "mycrawler_redis"
    redis_key = "mycrawler:start_urls"

    rules = (Rule(LinkExtractor(), callback="parse_page", follow=True),)

    def parse_page(self, response: Response) -> Iterator[Any]:
        yield {"url": response.url, "title": response.css("title::text").get()}
