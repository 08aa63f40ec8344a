"""A redirect to a challenge page that the client followed is still a block (fake pool: conftest)."""

import asyncio

import pytest

from exitpool_client import StillBlockedError, detect_block


def test_detect_block_judges_where_redirects_led():
    assert detect_block(200, {}, "One moment", redirected_to=["http://site.test/sorry/wait"]).kind == "captcha"
    assert detect_block(200, {}, "welcome", redirected_to=["http://site.test/login"]) is None


def _assert_two_blocked_tries_then_a_page(fake_pool, key):
    assert [urlpath(u) for u, _ in fake_pool.carried] == ["/start", "/sorry/wait", "/start", "/sorry/wait", "/account", "/login"]
    assert [(r["key"], r["kind"], r["domain"]) for r in fake_pool.reports] == [(key, "captcha", "site.test")] * 2, "none for the login redirect"
    assert "redirected to a challenge" in fake_pool.reports[0]["reason"]
    assert fake_pool.rotations == [key]


def urlpath(url):
    from urllib.parse import urlsplit

    return urlsplit(url).path


def test_requests_reports_a_followed_challenge_redirect(fake_pool):
    s = fake_pool.session("requests-redirect", attempts=2)
    with s.requests_session() as http:
        with pytest.raises(StillBlockedError) as e:
            http.get("http://site.test/start", timeout=10)
        assert e.value.block.kind == "captcha"
        assert http.get("http://site.test/account", timeout=10).text == "welcome"
    _assert_two_blocked_tries_then_a_page(fake_pool, "requests-redirect")


def test_httpx_reports_a_followed_challenge_redirect(fake_pool):
    s = fake_pool.session("httpx-redirect", attempts=2)
    with s.httpx_client(timeout=10, follow_redirects=True) as client:
        with pytest.raises(StillBlockedError):
            client.get("http://site.test/start")
        assert client.get("http://site.test/account").text == "welcome"
    _assert_two_blocked_tries_then_a_page(fake_pool, "httpx-redirect")


def test_httpx_async_reports_a_followed_challenge_redirect(fake_pool):
    s = fake_pool.session("httpx-async-redirect", attempts=2)

    async def run():
        async with s.httpx_async_client(timeout=10, follow_redirects=True) as client:
            with pytest.raises(StillBlockedError):
                await client.get("http://site.test/start")
            return (await client.get("http://site.test/account")).text

    assert asyncio.run(run()) == "welcome"
    _assert_two_blocked_tries_then_a_page(fake_pool, "httpx-async-redirect")
