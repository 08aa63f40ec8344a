"""After the session moves, the retry goes through a new proxy connection: a kept-alive one would
still lead to the exit the site just blocked (fake pool: conftest, which numbers connections)."""

from __future__ import annotations

import asyncio

import pytest

from exitpool_client import StillBlockedError

from conftest import FakePool


def _tries_on_distinct_connections(fake_pool: FakePool) -> None:
    tries = [n for url, n, _, _ in fake_pool.carried if url.endswith("/blocked")]
    assert len(tries) == 2
    assert fake_pool.rotations, "moved between the tries"
    assert tries[0] != tries[1], f"the retry reused connection {tries[0]}"
    # Without a move the connection is kept: the new one is the move's doing, not the fake's.
    pages = [n for url, n, _, _ in fake_pool.carried if url.endswith("/page")]
    assert len(pages) == 2 and pages[0] == pages[1]


def test_requests_retries_on_a_new_connection(fake_pool: FakePool) -> None:
    s = fake_pool.session("requests-conn", attempts=2)
    with s.requests_session() as http:
        with pytest.raises(StillBlockedError):
            http.get("http://site.test/blocked", timeout=10)
        http.get("http://site.test/page", timeout=10)
        http.get("http://site.test/page", timeout=10)
    _tries_on_distinct_connections(fake_pool)


def test_httpx_retries_on_a_new_connection(fake_pool: FakePool) -> None:
    s = fake_pool.session("httpx-conn", attempts=2)
    with s.httpx_client(timeout=10) as client:
        with pytest.raises(StillBlockedError):
            client.get("http://site.test/blocked")
        client.get("http://site.test/page")
        client.get("http://site.test/page")
    _tries_on_distinct_connections(fake_pool)


def test_httpx_async_retries_on_a_new_connection(fake_pool: FakePool) -> None:
    s = fake_pool.session("httpx-async-conn", attempts=2)

    async def run() -> None:
        async with s.httpx_async_client(timeout=10) as client:
            with pytest.raises(StillBlockedError):
                await client.get("http://site.test/blocked")
            await client.get("http://site.test/page")
            await client.get("http://site.test/page")

    asyncio.run(run())
    _tries_on_distinct_connections(fake_pool)


def test_httpx_owns_its_transport_and_leaves_httpx_internals_alone(fake_pool: FakePool) -> None:
    from exitpool_client.httpx_client import SessionTransport

    s = fake_pool.session("httpx-owned", attempts=2)
    with s.httpx_client(timeout=10) as client:
        transport = client._transport  # read only, to show it is ours
        assert isinstance(transport, SessionTransport)
        with pytest.raises(StillBlockedError):
            client.get("http://site.test/blocked")
        assert client._transport is transport, "the client's transport was not replaced or closed behind httpx's back"
