"""The Scrapy middleware's settings and per-request meta, by a real crawl through the fake pool
(conftest): body markers, challenge-redirect patterns, the mode, and meta lifetime and mode."""

import json
import os
import subprocess
import sys
from pathlib import Path


def crawl(fake_pool, settings, requests):
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
    return sorted(json.loads(r.stdout), key=lambda item: item["url"])


def test_body_markers_and_challenge_redirects_from_settings(fake_pool):
    items = crawl(
        fake_pool,
        {"EXITPOOL_SESSION": "rules", "EXITPOOL_ATTEMPTS": 2, "EXITPOOL_BODY_MARKERS": {r"queue-it": "rate_limited"}, "EXITPOOL_CHALLENGE_REDIRECTS": [r"/hold/"]},
        [{"url": "http://site.test/queue"}, {"url": "http://site.test/held"}, {"url": "http://site.test/start"}],
    )
    by_path = {item["url"].split("site.test", 1)[1]: item for item in items}
    assert by_path["/queue"]["blocked"] == "rate_limited" and by_path["/queue"]["attempt"] == 2
    # The 302 to /hold/please is the challenge now; /sorry/ (a default pattern) no longer is.
    assert by_path["/hold/please"]["blocked"] == "captcha"
    assert by_path["/sorry/wait?next=%2Fstart"]["blocked"] is None
    kinds = sorted((r["kind"], r["reason"].split(" (")[0]) for r in fake_pool.reports)
    assert kinds == [("captcha", "redirect to a challenge")] * 2 + [("rate_limited", "body matches queue-it")] * 2
    assert all(r["domain"] == "site.test" for r in fake_pool.reports)


def test_mode_setting_and_per_request_lifetime_and_mode(fake_pool):
    crawl(
        fake_pool,
        {"EXITPOOL_SESSION": "shop", "EXITPOOL_MODE": "rotating"},
        [
            {"url": "http://site.test/a"},
            {"url": "http://site.test/b", "meta": {"exitpool_lifetime": 90, "exitpool_mode": "sticky"}},
            {"url": "http://site.test/c", "meta": {"exitpool_lifetime": 60}},
        ],
    )
    users = {url.rsplit("/", 1)[1]: user for url, user in fake_pool.users}
    assert users == {"a": "shop-mode-rotating", "b": "shop-ttl-90s-mode-sticky", "c": "shop-ttl-60s-mode-rotating"}
