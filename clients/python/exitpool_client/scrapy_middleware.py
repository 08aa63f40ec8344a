"""A Scrapy downloader middleware: requests go through exitpool sessions; blocks are reported,
the session moved and the request retried, with settings in Scrapy's style.

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
    EXITPOOL_BODY_MARKERS = {r"queue-it": "rate_limited"}       # regex -> kind, on 200 pages; none by default
    EXITPOOL_CHALLENGE_REDIRECTS = [r"/hold/"]                  # regexes: URLs that are a challenge (replace the vendors')
    EXITPOOL_BAN_POLICY = "myproject.bans.MyBanPolicy"          # a class: response_is_ban(request, response)

Each rules setting, when set, replaces that part of the default rules (blocks.DEFAULT_BLOCK_RULES);
``EXITPOOL_BAN_POLICY`` replaces the policy as a whole, as scrapy-rotating-proxies'
``ROTATING_PROXY_BAN_POLICY`` does (subclass ``BanPolicy`` to add to the default).

A request that carries its own ``meta["proxy"]`` is left alone (``None``: fetched directly),
neither proxied nor judged. ``meta["exitpool_exit"]`` is the exit the session left through, as
the client last knew it (the proxy's ``Exitpool-Exit`` header when the service sends it, the
answer of a move, else one API read). A response still blocked after ``EXITPOOL_ATTEMPTS`` tries
reaches the spider with ``meta["exitpool_blocked"]`` set to the block's kind. The proxy's
refusals (``ProxyRefusedError``, typed by asking the service when Scrapy reports a refused
CONNECT as a bare ``TunnelError``) and ``NoFreshExitError`` go to the request's errback.

It must run before Scrapy's HttpProxyMiddleware (750), which turns the credentials in
``meta["proxy"]`` into the Proxy-Authorization header. Scrapy has no SOCKS5 support: the HTTP
proxy only.
"""

from __future__ import annotations

import logging
import re
from dataclasses import replace
from time import monotonic
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, TypeVar, Union

from scrapy import Request, Spider
from scrapy.crawler import Crawler
from scrapy.http import Response, TextResponse
from scrapy.settings import BaseSettings
from scrapy.utils.misc import load_object
from twisted.internet.defer import Deferred
from twisted.internet.threads import deferToThread

from .blocks import DEFAULT_BLOCK_RULES, Block, BlockRules, detect_block
from .challenges import ChallengeUrl
from .session import ExitpoolSession

logger = logging.getLogger(__name__)

T = TypeVar("T")


def in_thread(fn: Callable[..., T], *args: Any) -> "Deferred[T]":
    """``fn(*args)`` in Twisted's thread pool (the pool's API is called there, off the reactor)."""
    deferred: "Deferred[T]" = deferToThread(fn, *args)  # type: ignore[no-untyped-call]  # Twisted 22.4 leaves it unannotated
    return deferred


#: Set on the requests this middleware sends through exitpool (a request's own meta["proxy"] is not).
_MANAGED = "_exitpool"
_GENERATION = "_exitpool_generation"
_SENT_AT = "_exitpool_sent_at"


class ScrapyHeaders(Mapping[str, str]):
    """Scrapy's headers (bytes) as the str mapping the ban policy reads."""

    def __init__(self, headers: Any) -> None:
        self._headers = headers

    def __getitem__(self, name: str) -> str:
        value = self._headers.get(name)
        if value is None:
            raise KeyError(name)
        return value.decode("latin-1") if isinstance(value, bytes) else str(value)

    def __iter__(self) -> Any:
        return (k.decode("latin-1") if isinstance(k, bytes) else str(k) for k in self._headers.keys())

    def __len__(self) -> int:
        return len(self._headers)


class BanPolicy:
    """Whether a Scrapy response is a block: the default ban policy with the EXITPOOL_* rules.
    Override ``response_is_ban`` in a subclass, or name another class with the same method in
    ``EXITPOOL_BAN_POLICY``."""

    def __init__(self, rules: BlockRules = DEFAULT_BLOCK_RULES) -> None:
        self.rules = rules

    def response_is_ban(self, request: Request, response: Response) -> Optional[Block]:
        text = response.text if isinstance(response, TextResponse) else ""
        # Each hop of a redirect reaches this middleware on its own (it runs before
        # RedirectMiddleware): the 3xx itself is judged, its Location included.
        return detect_block(response.status, ScrapyHeaders(response.headers), text, self.rules, (), response.url)


class ExitpoolMiddleware:
    def __init__(self, settings: BaseSettings) -> None:
        self.token = settings.get("EXITPOOL_TOKEN")
        if not self.token:
            raise ValueError("EXITPOOL_TOKEN is not set")
        self.api = settings.get("EXITPOOL_API", "http://127.0.0.1:8080")
        self.http_proxy = settings.get("EXITPOOL_HTTP_PROXY", "127.0.0.1:9251")
        self.default_key = settings.get("EXITPOOL_SESSION", "scrapy")
        self.countries: Optional[List[str]] = settings.getlist("EXITPOOL_COUNTRIES") or None
        self.lifetime: Optional[int] = settings.getint("EXITPOOL_LIFETIME") or None
        self.mode: Optional[str] = settings.get("EXITPOOL_MODE") or None
        self.attempts = settings.getint("EXITPOOL_ATTEMPTS", 3)
        self.rules = rules_from_settings(settings)
        policy_class = settings.get("EXITPOOL_BAN_POLICY")
        self.ban_policy: Any = load_object(policy_class)(self.rules) if policy_class else BanPolicy(self.rules)
        self.sessions: Dict[Tuple[str, Tuple[str, ...], Optional[int], Optional[str]], ExitpoolSession] = {}

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> "ExitpoolMiddleware":
        return cls(crawler.settings)

    def session_for(self, request: Request) -> ExitpoolSession:
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

    def response_is_ban(self, request: Request, response: Response) -> Optional[Block]:
        """The hook scrapy-rotating-proxies users know: the ban policy's verdict."""
        block: Optional[Block] = self.ban_policy.response_is_ban(request, response)
        return block

    def process_request(self, request: Request, spider: Spider) -> None:
        if "proxy" in request.meta and not request.meta.get(_MANAGED):
            # The request's own proxy (None: direct) is left alone.
            return None
        session = self.session_for(request)
        request.meta["proxy"] = session.proxy_url("http")
        request.meta[_MANAGED] = True
        request.meta[_GENERATION] = session.generation
        request.meta[_SENT_AT] = monotonic()
        return None

    async def process_response(self, request: Request, response: Response, spider: Spider) -> Union[Request, Response]:
        if not request.meta.get(_MANAGED):
            return response
        session = self.session_for(request)
        headers = ScrapyHeaders(response.headers)
        leaving = session.exit
        # The proxy's own refusal raises ProxyRefusedError here: the request's errback gets it.
        session.note_proxy_answer(response.status, headers)
        block = self.response_is_ban(request, response)
        if block is None:
            if not session.exit:
                await in_thread(_read_exit, session)
            request.meta["exitpool_exit"] = session.exit
            return response
        if block.site is None:
            block = replace(block, site=response.url)
        attempt = request.meta.get("exitpool_attempt", 1)
        again = attempt < session.attempts
        await in_thread(session.after_block, block, request.meta.get(_GENERATION, session.generation), again, response, leaving)
        request.meta["exitpool_exit"] = session.exit
        if not again:
            logger.warning("still blocked after %d tries: %s (%s) on %s", attempt, block.kind, block.reason, request.url)
            # The page still reaches the spider (Scrapy has no StillBlockedError): the mark lets it
            # tell a block it gave up on from a page.
            request.meta["exitpool_blocked"] = block.kind
            return response
        logger.info("blocked (%s) on %s: reported, moved to %s, retrying", block.kind, request.url, session.exit or "a new exit")
        retry = request.replace(dont_filter=True)
        retry.meta["exitpool_attempt"] = attempt + 1
        return retry

    async def process_exception(self, request: Request, exception: Exception, spider: Spider) -> None:
        """A request that failed without a response (Scrapy reports a refused CONNECT as a bare
        TunnelError): when the service refused its route, the request's errback gets the typed
        refusal instead."""
        if not request.meta.get(_MANAGED):
            return None
        session = self.session_for(request)
        elapsed = monotonic() - request.meta.get(_SENT_AT, monotonic())
        typed = await in_thread(session.refusal_behind, exception, elapsed, "http")
        if typed is not exception:
            raise typed
        return None


def _read_exit(session: ExitpoolSession) -> None:
    try:
        session.current_exit()
    except Exception:  # noqa: BLE001 - the exit is a nicety; the page is what counts
        logger.debug("could not read the exit of session %s", session.key, exc_info=True)


def rules_from_settings(settings: BaseSettings) -> BlockRules:
    """The block rules the EXITPOOL_* settings make: each one set replaces that part of the defaults."""
    rules = DEFAULT_BLOCK_RULES
    statuses = settings.getdict("EXITPOOL_BLOCK_STATUSES")
    if statuses:
        rules = replace(rules, statuses={int(k): str(v) for k, v in statuses.items()})
    markers = settings.getdict("EXITPOOL_BODY_MARKERS")
    if markers:
        rules = replace(rules, body_markers=tuple((re.compile(str(p), re.I), str(kind)) for p, kind in markers.items()))
    redirects = settings.getlist("EXITPOOL_CHALLENGE_REDIRECTS")
    if redirects:
        rules = replace(rules, challenge_urls=tuple(ChallengeUrl("custom", re.compile(str(p), re.I)) for p in redirects))
    return rules
