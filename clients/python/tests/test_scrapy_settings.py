"""The Scrapy middleware by a real crawl through the fake pool (conftest): its settings and
per-request meta, a ban policy of the crawl's own, a request's own meta["proxy"], the exit
without EXIT_HEADER, and a refused CONNECT typed for the errback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

from conftest import FakePool


def crawl(fake_pool: FakePool, settings: Dict[str, Any], requests: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": os.pathsep.join(sys.path),
        "PYTHONDONTWRITEBYTECODE": "1",
        "EXITPOOL_SETTINGS": json.dumps({"EXITPOOL_TOKEN": "tp_test", "EXITPOOL_API": f"http://{fake_pool.address}", "EXITPOOL_HTTP_PROXY": fake_pool.address, **settings}),
        "REQUESTS": json.dumps(requests),
    }
    spider = Path(__file__).with_name("settings_spider.py")
    r = subprocess.run([sys.executable, "-m", "scrapy", "runspider", str(spider), "-o", "-:json", "--nolog"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    items: List[Dict[str, Any]] = json.loads(r.stdout)
    return sorted(items, key=lambda item: str(item["url"]))


def test_body_markers_and_challenge_redirects_from_settings(fake_pool: FakePool) -> None:
    items = crawl(
        fake_pool,
        {"EXITPOOL_SESSION": "rules", "EXITPOOL_ATTEMPTS": 2, "EXITPOOL_BODY_MARKERS": {r"queue-it": "rate_limited"}, "EXITPOOL_CHALLENGE_REDIRECTS": [r"/hold/"]},
        # A session each: blocks met at once on one session's exit are one event, reported once.
        [{"url": f"http://site.test/{p}", "meta": {"exitpool_session": p}} for p in ("queue", "held", "start")],
    )
    by_path = {item["url"].split("://", 1)[1].split("/", 1)[1]: item for item in items}
    assert by_path["queue"]["blocked"] == "rate_limited" and by_path["queue"]["attempt"] == 2
    # The 302 to /hold/please is the challenge now; DataDome's host (a default URL) no longer is.
    assert by_path["hold/please"]["blocked"] == "captcha"
    assert by_path["captcha/?initialCid=abc"]["blocked"] is None
    kinds = sorted((r["kind"], r["reason"].split(" (")[0]) for r in fake_pool.reports)
    assert kinds == [("captcha", "redirect to custom's challenge")] * 2 + [("rate_limited", "body matches queue-it")] * 2
    assert all(r["domain"] == "site.test" for r in fake_pool.reports)


def test_a_ban_policy_of_the_crawls_own(fake_pool: FakePool) -> None:
    items = crawl(fake_pool, {"EXITPOOL_SESSION": "policy", "EXITPOOL_ATTEMPTS": 2, "EXITPOOL_BAN_POLICY": "settings_spider.QueueIsABan"}, [{"url": "http://site.test/queue"}])
    assert items[0]["blocked"] == "rate_limited"
    assert [r["reason"] for r in fake_pool.reports] == ["in the waiting room"] * 2


def test_mode_setting_and_per_request_lifetime_and_mode(fake_pool: FakePool) -> None:
    crawl(
        fake_pool,
        {"EXITPOOL_SESSION": "shop", "EXITPOOL_MODE": "rotating"},
        [
            {"url": "http://site.test/a"},
            {"url": "http://site.test/b", "meta": {"exitpool_lifetime": 90, "exitpool_mode": "sticky"}},
            {"url": "http://site.test/c", "meta": {"exitpool_lifetime": 60}},
        ],
    )
    users = {url.rsplit("/", 1)[1]: user for url, _, _, user in fake_pool.carried}
    assert users == {"a": "shop-mode-rotating", "b": "shop-ttl-90s-mode-sticky", "c": "shop-ttl-60s-mode-rotating"}


def test_a_requests_own_proxy_is_left_alone_and_none_is_direct(fake_pool: FakePool) -> None:
    direct = f"http://{fake_pool.address}/api/sessions/direct"
    items = crawl(
        fake_pool,
        {"EXITPOOL_SESSION": "mine"},
        [
            {"url": direct, "meta": {"proxy": None}},
            {"url": "http://site.test/own", "meta": {"proxy": f"http://{fake_pool.address}"}},
            {"url": "http://site.test/pooled"},
        ],
    )
    assert [i["url"] for i in items] == sorted([direct, "http://site.test/own", "http://site.test/pooled"])
    users = {url.rsplit("/", 1)[1]: user for url, _, _, user in fake_pool.carried}
    assert users == {"own": "", "pooled": "mine"}, "the own proxy without exitpool's credentials; the direct request not proxied at all"
    assert [path for path, _ in fake_pool.api_authorizations if path == "/api/sessions/direct"] == ["/api/sessions/direct"]


def test_the_exit_is_known_without_exit_header(fake_pool: FakePool) -> None:
    fake_pool.exit_header = False
    items = crawl(fake_pool, {"EXITPOOL_SESSION": "no-header"}, [{"url": "http://site.test/a"}, {"url": "http://site.test/b"}])
    assert [i["exit"] for i in items] == [fake_pool.exit_ip()] * 2
    reads = [path for path, _ in fake_pool.api_authorizations if path == "/api/sessions/no-header"]
    assert 1 <= len(reads) <= 2, "read once (twice at most, for two requests in flight at once), not per response"


def test_a_refused_connect_reaches_the_errback_typed(fake_pool: FakePool) -> None:
    fake_pool.connect_refusal = (503, 'exitpool; error=destination_unavailable; details="no exit in zz"')
    items = crawl(fake_pool, {"EXITPOOL_SESSION": "scrapy-zz", "EXITPOOL_COUNTRIES": ["zz"]}, [{"url": "https://site.test/"}])
    assert items == [{"url": "https://site.test/", "error": "ProxyRefusedError", "reason": "no_exit_in_country", "status": 503}]
