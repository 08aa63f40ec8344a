"""A Scrapy downloader middleware: requests go through exitpool sessions; blocks are reported,
the session rotated and the request retried, with settings in Scrapy's style.

    DOWNLOADER_MIDDLEWARES = {"exitpool_client.scrapy_middleware.ExitpoolMiddleware": 740}
    EXITPOOL_TOKEN = "tp_..."                 # a proxy token
    EXITPOOL_API = "http://127.0.0.1:8080"
    EXITPOOL_HTTP_PROXY = "127.0.0.1:9251"
    EXITPOOL_SESSION = "my-crawl"             # default session key; per request: meta["exitpool_session"]
    EXITPOOL_COUNTRIES = ["de"]               # per request: meta["exitpool_countries"]
    EXITPOOL_LIFETIME = 1800                  # seconds, optional; per request: meta["exitpool_lifetime"]
    EXITPOOL_MODE = "rotating"                # optional (default sticky); per request: meta["exitpool_mode"]
    EXITPOOL_ATTEMPTS = 3
    EXITPOOL_BLOCK_STATUSES = {403: "blocked", 429: "rate_limited"}
    EXITPOOL_BODY_MARKERS = {r"queue-it": "rate_limited"}       # regex -> kind, case-insensitive
    EXITPOOL_CHALLENGE_REDIRECTS = [r"/captcha", r"/challenge"]  # regexes on the Location

Each rules setting, when set, replaces that part of the default rules (blocks.DEFAULT_BLOCK_RULES).

A response still blocked after ``EXITPOOL_ATTEMPTS`` tries reaches the spider with
``meta["exitpool_blocked"]`` set to the block's kind.

It must run before Scrapy's HttpProxyMiddleware (750), which turns the credentials in
``meta["proxy"]`` into the Proxy-Authorization header.
"""

import logging
import re
from dataclasses import replace

from twisted.internet.threads import deferToThread

from .blocks import DEFAULT_BLOCK_RULES, BlockRules
from .errors import ProxyRefusedError
from .session import ExitpoolSession

logger = logging.getLogger(__name__)


class ExitpoolMiddleware:
    def __init__(self, settings):
        self.token = settings.get("EXITPOOL_TOKEN")
        if not self.token:
            raise ValueError("EXITPOOL_TOKEN is not set")
        self.api = settings.get("EXITPOOL_API", "http://127.0.0.1:8080")
        self.http_proxy = settings.get("EXITPOOL_HTTP_PROXY", "127.0.0.1:9251")
        self.default_key = settings.get("EXITPOOL_SESSION", "scrapy")
        self.countries = settings.getlist("EXITPOOL_COUNTRIES") or None
        self.lifetime = settings.getint("EXITPOOL_LIFETIME") or None
        self.mode = settings.get("EXITPOOL_MODE") or None
        self.attempts = settings.getint("EXITPOOL_ATTEMPTS", 3)
        self.rules = rules_from_settings(settings)
        self.sessions = {}

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler.settings)

    def session_for(self, request) -> ExitpoolSession:
        key = request.meta.get("exitpool_session", self.default_key)
        countries = request.meta.get("exitpool_countries", self.countries)
        lifetime = request.meta.get("exitpool_lifetime", self.lifetime)
        mode = request.meta.get("exitpool_mode", self.mode)
        # The username carries every choice, so each combination is a session object of its own.
        tag = (key, tuple(countries or ()), lifetime, mode)
        if tag not in self.sessions:
            self.sessions[tag] = ExitpoolSession(
                key, self.token, api=self.api, http_proxy=self.http_proxy, countries=countries, lifetime_seconds=lifetime, mode=mode, rules=self.rules, attempts=self.attempts
            )
        return self.sessions[tag]

    def process_request(self, request, spider):
        request.meta["proxy"] = self.session_for(request).proxy_url("http")
        return None

    async def process_response(self, request, response, spider):
        session = self.session_for(request)
        text = response.text if hasattr(response, "text") else ""
        try:
            block = await deferToThread(session.judge, response.status, _Headers(response.headers), text, request.url)
        except ProxyRefusedError as e:
            logger.warning("exitpool refused %s: %s", request.url, e)
            return response
        request.meta["exitpool_exit"] = session.exit
        if block is None:
            return response
        attempt = request.meta.get("exitpool_attempt", 1)
        if attempt >= session.attempts:
            logger.warning("still blocked after %d tries: %s (%s) on %s", attempt, block.kind, block.reason, request.url)
            # The page still reaches the spider (Scrapy has no StillBlockedError): the mark lets it
            # tell a block it gave up on from a page.
            request.meta["exitpool_blocked"] = block.kind
            return response
        await deferToThread(session.rotate)
        logger.info("blocked (%s) on %s: reported, rotated to %s, retrying", block.kind, request.url, session.exit)
        retry = request.replace(dont_filter=True)
        retry.meta["exitpool_attempt"] = attempt + 1
        return retry


def rules_from_settings(settings) -> BlockRules:
    """The block rules the EXITPOOL_* settings make: each one set replaces that part of the defaults."""
    rules = DEFAULT_BLOCK_RULES
    statuses = settings.getdict("EXITPOOL_BLOCK_STATUSES")
    if statuses:
        rules = replace(rules, statuses={int(k): v for k, v in statuses.items()})
    markers = settings.getdict("EXITPOOL_BODY_MARKERS")
    if markers:
        rules = replace(rules, body_markers=[(re.compile(p, re.I), kind) for p, kind in markers.items()])
    redirects = settings.getlist("EXITPOOL_CHALLENGE_REDIRECTS")
    if redirects:
        rules = replace(rules, challenge_redirects=[re.compile(p, re.I) for p in redirects])
    return rules


class _Headers:
    """Scrapy's headers (bytes) as the str mapping the block rules read."""

    def __init__(self, headers):
        self._headers = headers

    def get(self, name, default=None):
        value = self._headers.get(name)
        return value.decode("latin-1") if value is not None else default
