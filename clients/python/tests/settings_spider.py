"""A real Scrapy crawl for test_scrapy_settings.py: the EXITPOOL_* settings come as JSON in
EXITPOOL_SETTINGS, the requests (URL and meta) as JSON in REQUESTS; each response is an item."""

import json
import os

import scrapy


class SettingsSpider(scrapy.Spider):
    name = "settings"
    custom_settings = {
        "DOWNLOADER_MIDDLEWARES": {"exitpool_client.scrapy_middleware.ExitpoolMiddleware": 740},
        "ROBOTSTXT_OBEY": False,
        "RETRY_ENABLED": False,
        "TELNETCONSOLE_ENABLED": False,
        "HTTPERROR_ALLOW_ALL": True,
        **json.loads(os.environ["EXITPOOL_SETTINGS"]),
    }

    def start_requests(self):
        for r in json.loads(os.environ["REQUESTS"]):
            yield scrapy.Request(r["url"], meta=r.get("meta", {}), dont_filter=True)

    def parse(self, response):
        yield {
            "url": response.url,
            "body": response.text,
            "attempt": response.meta.get("exitpool_attempt", 1),
            "blocked": response.meta.get("exitpool_blocked"),
        }
