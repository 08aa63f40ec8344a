"""One exitpool session for requests, httpx (sync and async) and Scrapy."""

import json
import re
import urllib.error
import urllib.request
from typing import Iterable, Optional
from urllib.parse import quote, urlparse

from .blocks import DEFAULT_BLOCK_RULES, Block, BlockRules, detect_block
from .errors import ExitpoolApiError, ProxyRefusedError, SocksReplyError, StillBlockedError, parse_proxy_status
from .username import build_username

_SOCKS_REPLY = re.compile(r"0x0([1-8])")


def followed_redirects(response) -> list:
    """Where the redirects a requests or httpx response followed led, the final URL last."""
    history = list(getattr(response, "history", None) or [])
    if not history:
        return []
    return [str(r.url) for r in history[1:]] + [str(response.url)]


class ExitpoolSession:
    """A session key with its choices, and what to do when a site blocks it.

    ``fetch``-style wrappers (``requests_session``, ``httpx_client``, ``httpx_async_client``)
    judge every response by ``rules``; a block is reported to the pool with its kind and the
    site's domain, the session is rotated to a new exit, and the request is tried again, at most
    ``attempts`` times in all, then ``StillBlockedError``. The proxy's own refusals raise
    ``ProxyRefusedError`` (HTTP proxy) or ``SocksReplyError`` (SOCKS5). ``exit`` is the exit IP
    last seen (the ``Exitpool-Exit`` header when the service sends it, else ``current_exit()``).
    """

    def __init__(
        self,
        key: str,
        token: str,
        api: str = "http://127.0.0.1:8080",
        http_proxy: str = "127.0.0.1:9251",
        socks_proxy: str = "127.0.0.1:9250",
        countries: Optional[Iterable[str]] = None,
        lifetime_seconds: Optional[int] = None,
        mode: Optional[str] = None,
        rules: BlockRules = DEFAULT_BLOCK_RULES,
        attempts: int = 3,
    ):
        self.key = key
        self.token = token
        self.api = api.rstrip("/")
        self.http_proxy = http_proxy
        self.socks_proxy = socks_proxy
        self.username = build_username(key, countries, lifetime_seconds, mode)
        self.rules = rules
        self.attempts = max(1, attempts)
        self.exit = ""

    # ---- proxy addresses ----

    def proxy_url(self, scheme: str = "http") -> str:
        """``http://`` (the HTTP proxy) or ``socks5h://`` (SOCKS5, names resolved by the exit)."""
        cred = f"{quote(self.username, safe='')}:{quote(self.token, safe='')}@"
        if scheme == "http":
            return f"http://{cred}{self.http_proxy}"
        if scheme in ("socks5h", "socks5"):
            return f"socks5h://{cred}{self.socks_proxy}"
        raise ValueError("scheme is http or socks5h")

    def proxies(self, scheme: str = "http") -> dict:
        url = self.proxy_url(scheme)
        return {"http": url, "https": url}

    # ---- the pool's API ----

    def _api(self, method: str, path: str, body: Optional[dict] = None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.api + path, data=data, method=method, headers={"Authorization": f"Bearer {self.token}"})
        if data is not None:
            req.add_header("Content-Type", "application/json")
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(req, timeout=30) as r:
                text = r.read().decode()
        except urllib.error.HTTPError as e:
            raise ExitpoolApiError(e.code, e.read().decode(errors="replace")) from None
        return json.loads(text) if text else None

    def report(self, block: Block, domain: str) -> None:
        """Tells the pool what the site did (exitpool cannot see inside TLS)."""
        self._api("POST", f"/api/sessions/{quote(self.key, safe='')}/failure", {"kind": block.kind, "reason": block.reason, "domain": domain})

    def rotate(self) -> str:
        """Moves the session to a new exit; returns it."""
        r = self._api("POST", f"/api/sessions/{quote(self.key, safe='')}/rotate")
        self.exit = r.get("exit_ip", "") if r else ""
        return self.exit

    def current_exit(self) -> str:
        view = self._api("GET", f"/api/sessions/{quote(self.key, safe='')}")
        self.exit = view.get("exit_ip", "") if view else ""
        return self.exit

    # ---- judging a response ----

    def judge(self, status: int, headers, text: str, url: str, redirected_to: Iterable[str] = ()) -> Optional[Block]:
        """Raises on the proxy's own refusal; reports and returns a block; None for a good response.
        ``redirected_to``: where followed redirects led (``detect_block``)."""
        ps = parse_proxy_status(headers.get("proxy-status"))
        if ps and ps["proxy"] == "exitpool" and status >= 400:
            raise ProxyRefusedError(status, ps)
        named = headers.get("exitpool-exit")
        if named:
            self.exit = named
        block = detect_block(status, headers, text, self.rules, redirected_to)
        if block is not None:
            self.report(block, urlparse(str(url)).hostname or "")
        return block

    def attempt(self, url: str, send, close_connections=None):
        """The loop every synchronous client shares: ``send()`` makes the request and returns the
        client's response (``status_code``, ``headers``, ``text``); a block is reported, the session
        rotated (``close_connections()`` drops pooled tunnels to the old exit) and ``send()`` called
        again, ``attempts`` times in all."""
        for attempt in range(1, self.attempts + 1):
            response = send()
            block = self.judge(response.status_code, response.headers, response.text, url, followed_redirects(response))
            if block is None:
                return response
            if attempt == self.attempts:
                raise StillBlockedError(block, attempt, response)
            self.rotate()
            if close_connections is not None:
                close_connections()

    @staticmethod
    def socks_error(error: Exception) -> Optional[SocksReplyError]:
        """The SOCKS5 reply behind a client library's connection error, if there was one."""
        m = _SOCKS_REPLY.search(str(error))
        return SocksReplyError(int(m.group(1))) if m and "socks" in repr(error).lower() else None

    # ---- clients ----

    def requests_session(self, scheme: str = "http"):
        """A ``requests.Session`` through the pool that reports blocks, rotates and retries."""
        import requests

        outer = self

        class ExitpoolRequestsSession(requests.Session):
            def request(self, method, url, *args, **kwargs):
                def send():
                    try:
                        return super(ExitpoolRequestsSession, self).request(method, url, *args, **kwargs)
                    except requests.exceptions.ConnectionError as e:
                        refused = outer.socks_error(e)
                        if refused:
                            raise refused from e
                        raise

                return outer.attempt(url, send, self.close)

        s = ExitpoolRequestsSession()
        s.trust_env = False
        s.proxies = self.proxies(scheme)
        return s

    def _httpx_proxy_args(self) -> dict:
        import httpx

        version = tuple(int(p) for p in httpx.__version__.split(".")[:2])
        return {"proxy": self.proxy_url("http")} if version >= (0, 26) else {"proxies": self.proxy_url("http")}

    def httpx_client(self, **kwargs):
        """An ``httpx.Client`` through the pool's HTTP proxy that reports blocks, rotates and retries."""
        import httpx

        outer = self

        class ExitpoolHttpxClient(httpx.Client):
            def request(self, method, url, *args, **kw):
                return outer.attempt(str(url), lambda: super(ExitpoolHttpxClient, self).request(method, url, *args, **kw), self._drop_pooled_connections)

            def _drop_pooled_connections(self):
                for transport in _httpx_transports(self):
                    transport.close()

        return ExitpoolHttpxClient(trust_env=False, **self._httpx_proxy_args(), **kwargs)

    def httpx_async_client(self, **kwargs):
        """The same as ``httpx_client`` for asyncio (the pool's API is called in a thread)."""
        import asyncio

        import httpx

        outer = self

        class ExitpoolAsyncHttpxClient(httpx.AsyncClient):
            # The same loop as ``attempt``, awaiting the request; the pool's API runs in a thread.
            async def request(self, method, url, *args, **kw):
                loop = asyncio.get_running_loop()
                for attempt in range(1, outer.attempts + 1):
                    response = await super().request(method, url, *args, **kw)
                    block = await loop.run_in_executor(None, outer.judge, response.status_code, response.headers, response.text, str(url), followed_redirects(response))
                    if block is None:
                        return response
                    if attempt == outer.attempts:
                        raise StillBlockedError(block, attempt, response)
                    await loop.run_in_executor(None, outer.rotate)
                    for transport in _httpx_transports(self):
                        await transport.aclose()

        return ExitpoolAsyncHttpxClient(trust_env=False, **self._httpx_proxy_args(), **kwargs)


def _httpx_transports(client) -> list:
    """The transports of an httpx client (its own, and the proxy's mount), whose pooled
    connections lead to the exit the session had before a rotation. httpx has no public way to
    drop them short of closing the client; a transport closed this way only empties its pool and
    opens new connections on the next request."""
    mounts = getattr(client, "_mounts", {}) or {}
    return [t for t in [getattr(client, "_transport", None), *mounts.values()] if t is not None]
