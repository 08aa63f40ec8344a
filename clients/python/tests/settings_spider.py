"""A real Scrapy crawl for test_scrapy_settings.py: the EXITPOOL_* settings come as JSON in
EXITPOOL_SETTINGS, the requests (URL and meta) as JSON in REQUESTS; each response, or each
failure the errback gets, is an item."""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Iterator, Optional

import scrapy
from twisted.python.failure import Failure

from exitpool_client import Block
from exitpool_client.scrapy_middleware import BanPolicy


class QueueIsABan(BanPolicy):
    """A ban policy of the crawl's own (EXITPOOL_BAN_POLICY): a waiting room is a rate limit."""

    def response_is_ban(self, request: Any, response: Any) -> Optional[Block]:
        if b"queue-it" in response.body:
            return Block("rate_limited", "in the waiting room")
        return super().response_is_ban(request, response)


class SettingsSpider(scrapy.Spider):  # type: ignore[misc]  # Scrapy ships no types
    name = "settings"
    custom_settings = {
        "DOWNLOADER_MIDDLEWARES": {"exitpool_client.scrapy_middleware.ExitpoolMiddleware": 740},
        "ROBOTSTXT_OBEY": False,
        "RETRY_ENABLED": False,
        "TELNETCONSOLE_ENABLED": False,
        "HTTPERROR_ALLOW_ALL": True,
        **json.loads(os.environ["EXITPOOL_SETTINGS"]),
    }

    def start_requests(self) -> Iterator[scrapy.Request]:
        for r in json.loads(os.environ["REQUESTS"]):
            yield scrapy.Request(r["url"], meta=r.get("meta", {}), dont_filter=True, errback=self.failed)

    def parse(self, response: Any) -> Iterator[Dict[str, Any]]:
        yield {
            "url": response.url,
            "body": response.text,
            "attempt": response.meta.get("exitpool_attempt", 1),
            "blocked": response.meta.get("exitpool_blocked"),
            "exit": response.meta.get("exitpool_exit"),
        }

    def failed(self, failure: Failure) -> Iterator[Dict[str, Any]]:
        error = failure.value
        # Scrapy hands the errback the failure with the request set on it.
        request: Any = getattr(failure, "request")
        yield {"url": request.url, "error": type(error).__name__, "reason": getattr(error, "reason", None), "status": getattr(error, "status", None)}
