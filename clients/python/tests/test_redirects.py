"""A redirect to a vendor's challenge that the client followed is still a block, reported for
the site that redirected; a redirect to a path that says "challenge" is not (fake pool: conftest)."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

import pytest

from exitpool_client import StillBlockedError, detect_block

from conftest import FakePool

CHALLENGE = "http://geo.captcha-delivery.com/captcha/?initialCid=abc"


def test_detect_block_judges_where_redirects_led() -> None:
    block = detect_block(200, {}, "One moment", redirected_to=[CHALLENGE], url="http://site.test/start")
    assert block is not None and (block.kind, block.vendor, block.site) == ("captcha", "datadome", "http://site.test/start")
    assert detect_block(200, {}, "welcome", redirected_to=["http://site.test/login"]) is None
    assert detect_block(200, {}, "welcome", redirected_to=["http://site.test/coding-challenge-2026"]) is None


def _assert_two_blocked_tries_then_pages(fake_pool: FakePool, key: str) -> None:
    paths = [urlsplit(u).path for u, _, _, _ in fake_pool.carried]
    assert paths == ["/start", "/captcha/", "/start", "/captcha/", "/account", "/login", "/contest", "/coding-challenge-2026"]
    assert [(r["key"], r["kind"], r["domain"]) for r in fake_pool.reports] == [(key, "captcha", "site.test")] * 2, "none for the login or the contest"
    assert "redirected to datadome's challenge" in fake_pool.reports[0]["reason"]
    assert fake_pool.rotations == [key]


def test_requests_reports_a_followed_challenge_redirect(fake_pool: FakePool) -> None:
    s = fake_pool.session("requests-redirect", attempts=2)
    with s.requests_session() as http:
        with pytest.raises(StillBlockedError) as e:
            http.get("http://site.test/start", timeout=10)
        assert e.value.block.kind == "captcha"
        assert http.get("http://site.test/account", timeout=10).text == "welcome"
        assert http.get("http://site.test/contest", timeout=10).text == "welcome"
    _assert_two_blocked_tries_then_pages(fake_pool, "requests-redirect")


def test_httpx_reports_a_followed_challenge_redirect(fake_pool: FakePool) -> None:
    s = fake_pool.session("httpx-redirect", attempts=2)
    with s.httpx_client(timeout=10, follow_redirects=True) as client:
        with pytest.raises(StillBlockedError):
            client.get("http://site.test/start")
        assert client.get("http://site.test/account").text == "welcome"
        assert client.get("http://site.test/contest").text == "welcome"
    _assert_two_blocked_tries_then_pages(fake_pool, "httpx-redirect")


def test_httpx_async_reports_a_followed_challenge_redirect(fake_pool: FakePool) -> None:
    s = fake_pool.session("httpx-async-redirect", attempts=2)

    async def run() -> str:
        async with s.httpx_async_client(timeout=10, follow_redirects=True) as client:
            with pytest.raises(StillBlockedError):
                await client.get("http://site.test/start")
            text = (await client.get("http://site.test/account")).text
            await client.get("http://site.test/contest")
            return text

    assert asyncio.run(run()) == "welcome"
    _assert_two_blocked_tries_then_pages(fake_pool, "httpx-async-redirect")


def test_a_cross_host_redirect_reports_the_host_that_answered(fake_pool: FakePool) -> None:
    s = fake_pool.session("cross", attempts=1)
    with s.requests_session() as http:
        with pytest.raises(StillBlockedError):
            http.get("http://site.test/cross", timeout=10)
    assert [r["domain"] for r in fake_pool.reports] == ["www.site.test"]
