import re

import pytest

from exitpool_client import DEFAULT_BLOCK_RULES, InvalidSessionChoice, build_username, detect_block, parse_proxy_status
from exitpool_client.blocks import BlockRules


def test_username_with_choices():
    assert build_username("shop-1", countries=["DE", "nl"], lifetime_seconds=1800, mode="rotating") == "shop%2D1-country-de,nl-ttl-1800s-mode-rotating"


def test_username_plain_and_escaped():
    assert build_username("plain-key") == "plain-key"
    assert build_username("shop-country-de") == "shop%2Dcountry%2Dde-mode-sticky"


@pytest.mark.parametrize("kwargs", [{"countries": ["deu"]}, {"lifetime_seconds": 0}, {"mode": "fast"}])
def test_username_refuses(kwargs):
    with pytest.raises(InvalidSessionChoice):
        build_username("k", **kwargs)


def test_proxy_status():
    assert parse_proxy_status('exitpool; error=destination_unavailable; details="no exit in fr: \\"x\\""') == {
        "proxy": "exitpool",
        "error": "destination_unavailable",
        "details": 'no exit in fr: "x"',
    }
    assert parse_proxy_status(None) is None


def test_blocks():
    assert detect_block(403, {}, "").kind == "blocked"
    assert detect_block(429, {}, "").kind == "rate_limited"
    assert detect_block(302, {"location": "/captcha?next=/"}, "").kind == "captcha"
    assert detect_block(200, {}, "<h1>Please solve the CAPTCHA</h1>").kind == "captcha"
    assert detect_block(200, {}, "127.0.0.1") is None
    assert detect_block(451, {}, "", BlockRules(statuses={451: "blocked"})).kind == "blocked"
    assert re.search(DEFAULT_BLOCK_RULES.body_markers[0][0], "exitpool-testnet-captcha")
