"""requests through an exitpool session (``ExitpoolSession.requests_session``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import requests

if TYPE_CHECKING:  # pragma: no cover
    from .session import ExitpoolSession


class ExitpoolRequestsSession(requests.Session):
    """A ``requests.Session`` whose every request goes through ``exitpool`` (the session's loop:
    a block is reported, the session moved, the request retried). When the session moves, the
    pooled connections (which lead to the old exit) are dropped before the next request. requests
    drops ``Authorization`` on a redirect to another host by itself."""

    def __init__(self, exitpool: ExitpoolSession, scheme: str) -> None:
        super().__init__()
        self.exitpool = exitpool
        self.trust_env = False
        self.proxies = exitpool.proxies(scheme)
        self._listener = "socks5" if scheme.startswith("socks") else "http"
        self._seen = exitpool.generation

    def request(self, method: str | bytes, url: str | bytes, *args: Any, **kwargs: Any) -> requests.Response:
        def send() -> requests.Response:
            if self._seen != self.exitpool.generation:
                self._seen = self.exitpool.generation
                self.close()
            return super(ExitpoolRequestsSession, self).request(method, url, *args, **kwargs)

        text_url = url.decode() if isinstance(url, bytes) else url
        return self.exitpool.attempt(text_url, send, self._listener, (requests.exceptions.ConnectionError,))


def requests_session(exitpool: ExitpoolSession, scheme: str = "http") -> ExitpoolRequestsSession:
    if scheme not in ("http", "socks5h", "socks5"):
        raise ValueError("scheme is http or socks5h")
    return ExitpoolRequestsSession(exitpool, scheme)
