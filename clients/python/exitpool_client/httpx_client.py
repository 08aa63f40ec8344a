"""httpx through an exitpool session (``ExitpoolSession.httpx_client``, ``httpx_async_client``).

The client is given a transport of this module's own (``SessionTransport``), which opens its
connections through the pool's HTTP proxy or SOCKS5 listener and is replaced, and the old one
closed, when the session moves: the pooled connections of the old one lead to the exit the site
just blocked. httpx's own transports and mounts are left alone."""

from __future__ import annotations

import asyncio
import threading
from time import monotonic
from typing import TYPE_CHECKING, Any, Callable, Dict, Union

import httpx

from .errors import StillBlockedError

if TYPE_CHECKING:  # pragma: no cover
    from .session import ExitpoolSession

#: Keyword arguments of ``httpx.Client`` that configure its transport: given to ours instead.
TRANSPORT_OPTIONS = ("verify", "cert", "http1", "http2", "limits", "retries", "local_address")


def _proxy(exitpool: ExitpoolSession, scheme: str) -> httpx.Proxy:
    # Credentials as they are (not percent-encoded in a URL): the username may hold "%2D".
    if scheme == "http":
        return httpx.Proxy(f"http://{exitpool.http_proxy}", auth=(exitpool.username, exitpool.token))
    if scheme in ("socks5", "socks5h"):
        # httpx sends the host name in its SOCKS5 request: the exit resolves it.
        return httpx.Proxy(f"socks5://{exitpool.socks_proxy}", auth=(exitpool.username, exitpool.token))
    raise ValueError("scheme is http or socks5")


class SessionTransport(httpx.BaseTransport):
    """A transport for one exitpool session, made afresh (the old one closed) when it moves."""

    def __init__(self, exitpool: ExitpoolSession, make: Callable[[], httpx.BaseTransport]) -> None:
        self._exitpool = exitpool
        self._make = make
        self._lock = threading.Lock()
        self._generation = exitpool.generation
        self._inner = make()

    def _current(self) -> httpx.BaseTransport:
        with self._lock:
            if self._generation != self._exitpool.generation:
                old, self._inner = self._inner, self._make()
                self._generation = self._exitpool.generation
                old.close()
            return self._inner

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        return self._current().handle_request(request)

    def close(self) -> None:
        self._inner.close()


class AsyncSessionTransport(httpx.AsyncBaseTransport):
    """SessionTransport for asyncio."""

    def __init__(self, exitpool: ExitpoolSession, make: Callable[[], httpx.AsyncBaseTransport]) -> None:
        self._exitpool = exitpool
        self._make = make
        self._generation = exitpool.generation
        self._inner = make()

    async def _current(self) -> httpx.AsyncBaseTransport:
        if self._generation != self._exitpool.generation:
            old, self._inner = self._inner, self._make()
            self._generation = self._exitpool.generation
            await old.aclose()
        return self._inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await (await self._current()).handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


class ExitpoolHttpxClient(httpx.Client):
    """An ``httpx.Client`` whose every request goes through the session's loop."""

    def __init__(self, exitpool: ExitpoolSession, listener: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.exitpool = exitpool
        self._listener = listener

    def request(self, method: str, url: Union[httpx.URL, str], *args: Any, **kwargs: Any) -> httpx.Response:
        def send() -> httpx.Response:
            return super(ExitpoolHttpxClient, self).request(method, url, *args, **kwargs)

        return self.exitpool.attempt(str(url), send, self._listener, (httpx.TransportError,))


class ExitpoolAsyncHttpxClient(httpx.AsyncClient):
    """The same for asyncio: the loop awaits the request; the pool's API is called in a thread."""

    def __init__(self, exitpool: ExitpoolSession, listener: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.exitpool = exitpool
        self._listener = listener

    async def request(self, method: str, url: Union[httpx.URL, str], *args: Any, **kwargs: Any) -> httpx.Response:
        session = self.exitpool
        loop = asyncio.get_running_loop()
        for attempt in range(1, session.attempts + 1):
            generation = session.generation
            started = monotonic()
            try:
                response = await super().request(method, url, *args, **kwargs)
            except httpx.TransportError as error:
                typed = await loop.run_in_executor(None, session.refusal_behind, error, monotonic() - started, self._listener)
                if typed is error:
                    raise
                raise typed from error
            leaving = session.exit
            block = session.judge_response(response, str(url))
            if block is None:
                return response
            again = attempt < session.attempts
            await loop.run_in_executor(None, session.after_block, block, generation, again, response, leaving)
            if not again:
                raise StillBlockedError(block, attempt, response)
        raise AssertionError("unreachable: the last try returns or raises")


def _split(kwargs: Dict[str, Any]) -> Dict[str, Any]:
    return {k: kwargs.pop(k) for k in TRANSPORT_OPTIONS if k in kwargs}


def _listener(scheme: str) -> str:
    return "socks5" if scheme.startswith("socks") else "http"


def httpx_client(exitpool: ExitpoolSession, scheme: str = "http", **kwargs: Any) -> ExitpoolHttpxClient:
    proxy = _proxy(exitpool, scheme)
    options = _split(kwargs)
    transport = SessionTransport(exitpool, lambda: httpx.HTTPTransport(proxy=proxy, trust_env=False, **options))
    return ExitpoolHttpxClient(exitpool, _listener(scheme), transport=transport, trust_env=False, **kwargs)


def httpx_async_client(exitpool: ExitpoolSession, scheme: str = "http", **kwargs: Any) -> ExitpoolAsyncHttpxClient:
    proxy = _proxy(exitpool, scheme)
    options = _split(kwargs)
    transport = AsyncSessionTransport(exitpool, lambda: httpx.AsyncHTTPTransport(proxy=proxy, trust_env=False, **options))
    return ExitpoolAsyncHttpxClient(exitpool, _listener(scheme), transport=transport, trust_env=False, **kwargs)
