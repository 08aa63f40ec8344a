"""A real Scrapy crawl through the ExitpoolMiddleware (test/e2e/client-python.test.ts,
client-refusals.test.ts): one page, whose answer (the exit's address, or a captcha) becomes the
item, or the failure the errback got."""

import os

import scrapy


class WhoamiSpider(scrapy.Spider):
    name = "whoami"
    custom_settings = {
        "DOWNLOADER_MIDDLEWARES": {"exitpool_client.scrapy_middleware.ExitpoolMiddleware": 740},
        "EXITPOOL_TOKEN": os.environ["EXITPOOL_TOKEN"],
        "EXITPOOL_API": os.environ["EXITPOOL_API"],
        "EXITPOOL_HTTP_PROXY": os.environ["EXITPOOL_HTTP"],
        "EXITPOOL_SESSION": os.environ["SESSION_KEY"],
        "EXITPOOL_COUNTRIES": [c for c in os.environ.get("COUNTRIES", "").split(",") if c],
        "EXITPOOL_ATTEMPTS": int(os.environ.get("ATTEMPTS", "3")),
        "ROBOTSTXT_OBEY": False,
        "RETRY_ENABLED": False,
        "LOG_LEVEL": "INFO",
        "TELNETCONSOLE_ENABLED": False,
    }

    def start_requests(self):
        yield scrapy.Request(os.environ["TARGET_URL"], errback=self.failed)

    def parse(self, response):
        yield {
            "status": response.status,
            "body": response.text.strip(),
            "exit": response.meta.get("exitpool_exit", ""),
            "attempt": response.meta.get("exitpool_attempt", 1),
            "blocked": response.meta.get("exitpool_blocked"),
        }

    def failed(self, failure):
        # The middleware types the proxy's refusals (a refused CONNECT reaches Scrapy as a bare TunnelError).
        error = failure.value
        yield {"error": type(error).__name__, "status": getattr(error, "status", None), "reason": getattr(error, "reason", None), "source": getattr(error, "source", None)}
