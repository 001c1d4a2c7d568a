"""Sends one PUT with a body and headers through the frontier to the test web's /echo."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

from scrapy import Request, Spider
from scrapy.http import Response


class EchoSpider(Spider):
    name = "echo"

    def __init__(self, seeds: str, body_hex: str, crawl: str = "echo", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.url = seeds.split(",")[0]
        self.body = bytes.fromhex(body_hex)
        self.crawl_name = crawl

    async def start(self) -> AsyncIterator[Request]:
        yield Request(
            self.url,
            method="PUT",
            body=self.body,
            headers={"X-Custom": "välue".encode("latin-1"), "Content-Type": "application/json"},
            meta={"marker": [1, "two", {"three": 3.0}]},
            cb_kwargs={"tag": "round-trip"},
            callback=self.parse_echo,
        )

    def parse_echo(self, response: Response, tag: str) -> Iterator[dict[str, Any]]:
        echo = json.loads(response.body)
        yield {
            "echo": echo,
            "sent_body_hex": base64.b64decode(echo["body_b64"]).hex(),
            "cb_kwargs": {"tag": tag},
            "meta_marker": response.meta["marker"],
        }
