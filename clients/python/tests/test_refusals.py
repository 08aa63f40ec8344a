"""The proxy's refusals as typed errors where the libraries hide them (fake pool: conftest):
requests and httpx report a refused CONNECT, and a SOCKS5 refusal, only in words; the client
asks the service once and raises ProxyRefusedError or SocksReplyError with its reason."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable

import pytest

from exitpool_client import ExitpoolSession, ProxyRefusedError, SocksReplyError

from conftest import FakePool

PROXY_STATUS = 'exitpool; error=destination_unavailable; details="no exit in zz: none in the exit catalog"'


def _requests(s: ExitpoolSession, scheme: str) -> Any:
    with s.requests_session(scheme) as http:
        return http.get("https://site.test/" if scheme == "http" else "http://site.test/", timeout=10)


def _httpx(s: ExitpoolSession, scheme: str) -> Any:
    with s.httpx_client(scheme, timeout=10) as client:
        return client.get("https://site.test/" if scheme == "http" else "http://site.test/")


def _httpx_async(s: ExitpoolSession, scheme: str) -> Any:
    async def run() -> Any:
        async with s.httpx_async_client(scheme, timeout=10) as client:
            return await client.get("https://site.test/" if scheme == "http" else "http://site.test/")

    return asyncio.run(run())


CLIENTS = {"requests": _requests, "httpx": _httpx, "httpx-async": _httpx_async}


@pytest.mark.parametrize("client", CLIENTS, ids=str)
def test_a_refused_connect_is_a_proxy_refused_error(fake_pool: FakePool, client: str) -> None:
    fake_pool.connect_refusal = (503, PROXY_STATUS)
    s = fake_pool.session(f"{client}-zz", countries=["zz"])
    with pytest.raises(ProxyRefusedError) as e:
        CLIENTS[client](s, "http")
    assert (e.value.status, e.value.proxy_status.error, e.value.reason, e.value.source, e.value.retryable) == (503, "destination_unavailable", "no_exit_in_country", "service", False)
    assert sum(1 for path, _ in fake_pool.api_authorizations if path.endswith("/refusal")) == 1


@pytest.mark.parametrize("client", CLIENTS, ids=str)
def test_a_socks5_refusal_is_a_socks_reply_error(fake_pool: FakePool, client: str) -> None:
    host, port = fake_pool.refuse_socks(3).rsplit(":", 1)
    s = ExitpoolSession(f"{client}-socks-zz", "tp_test", api=f"http://{fake_pool.address}", socks_proxy=f"{host}:{port}", countries=["zz"])
    with pytest.raises(SocksReplyError) as e:
        CLIENTS[client](s, "socks5h" if client == "requests" else "socks5")
    assert (e.value.code, e.value.reason, e.value.retryable) == (3, "no_exit_in_country", False)


def test_a_refusal_older_than_the_request_is_not_its_own(fake_pool: FakePool) -> None:
    import requests

    s = fake_pool.session("stale", countries=["zz"])
    fake_pool.refusal = {"key": "stale", "at": time.time() - 10, "socks_reply": 3}
    send: Callable[[], Any] = lambda: _requests(s, "http")  # noqa: E731
    # The CONNECT is accepted and the tunnel closed at once: requests fails on its own.
    with pytest.raises(requests.exceptions.RequestException) as e:
        send()
    assert not isinstance(e.value, ProxyRefusedError)


def test_an_http_url_refused_by_the_proxy_reads_its_answer(fake_pool: FakePool) -> None:
    fake_pool.site = lambda url: (503, {"Proxy-Status": PROXY_STATUS}, "no exit in zz")
    s = fake_pool.session("plain-zz", countries=["zz"])
    with s.requests_session() as http, pytest.raises(ProxyRefusedError) as e:
        http.get("http://site.test/", timeout=10)
    assert (e.value.status, e.value.source, e.value.retryable) == (503, "proxy", False)
    assert e.value.proxy_status.details == "no exit in zz: none in the exit catalog"
