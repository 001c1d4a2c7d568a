"""A spider as Scrapy's tutorial teaches one: ``start_urls``, ``parse`` for the
listings, ``response.follow`` to each product with a callback of its own (a
private method) and ``cb_kwargs``, dict items, no errback, no crawl name.

    scrapy crawl shop -a shop=http://127.0.9.3:8000/ -O products.jsonl

The shop is testkit/own_sites.py's ``ShopSite``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import scrapy
from scrapy.http import Response


class ShopSpider(scrapy.Spider):
    name = "shop"

    def __init__(self, shop: str = "http://127.0.9.3:8000/", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [shop]

    def parse(self, response: Response, page: int = 1) -> Iterator[Any]:
        for href in response.css("a.product::attr(href)").getall():
            yield response.follow(href, self._parse_product, cb_kwargs={"listing": page})
        next_page = response.css("li.next a::attr(href)").get()
        if next_page is not None:
            yield response.follow(next_page, self.parse, cb_kwargs={"page": page + 1})

    def _parse_product(self, response: Response, listing: int) -> Iterator[dict[str, Any]]:
        yield {
            "name": response.css("h1.name::text").get(),
            "price": response.css("p.price::text").get(),
            "sku": response.css("p.sku::text").get(),
            "listing": listing,
            "url": response.url,
        }
