"""Block detection on the corpus of clients/test-pages, which the Node client's tests read too:
no ordinary page is a block, every challenge is recognised, and a report names the right site."""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List
from urllib.parse import urlsplit

import pytest

from exitpool_client import DEFAULT_BLOCK_RULES, BlockRules, ResponseFacts, default_ban_policy, detect_block, report_domain, retry_after_seconds

from conftest import DATA

PAGES = DATA / "test-pages"
CASES: List[Dict[str, Any]] = json.loads((PAGES / "pages.json").read_text(encoding="utf-8"))["cases"]


def _body(case: Dict[str, Any]) -> str:
    return (PAGES / "pages" / str(case["page"])).read_text(encoding="utf-8") if "page" in case else str(case.get("body", ""))


@pytest.mark.parametrize("case", CASES, ids=lambda c: str(c["name"]))
def test_corpus(case: Dict[str, Any]) -> None:
    facts = ResponseFacts(case["status"], case["headers"], _body(case), case["url"], case.get("redirected_to", []))
    block = default_ban_policy(facts)
    expect = case["expect"]
    if expect is None:
        assert block is None, block
        return
    assert block is not None
    assert block.kind == expect["kind"]
    assert block.vendor == expect.get("vendor")
    if "retry_after_seconds" in expect:
        assert block.retry_after_seconds == expect["retry_after_seconds"]
    if "report_domain" in case:
        assert report_domain(block.site or case["url"]) == case["report_domain"]


def test_the_corpus_covers_ordinary_pages_and_every_vendor() -> None:
    assert sum(1 for c in CASES if c["expect"] is None) >= 15
    vendors = {c["expect"].get("vendor") for c in CASES if c["expect"] is not None}
    assert {"cloudflare", "datadome", "perimeterx", "akamai", "imperva", "recaptcha", "hcaptcha"} <= vendors
    assert all(report_domain(f"http://{urlsplit(c['url']).netloc}/") is None for c in CASES if c.get("report_domain", "") is None)


def test_body_markers_only_when_asked_and_only_on_200() -> None:
    rules = BlockRules(body_markers=((re.compile("queue-it", re.I), "rate_limited"),))
    assert detect_block(200, {}, "You are in line (Queue-it)") is None
    block = detect_block(200, {}, "You are in line (Queue-it)", rules)
    assert block is not None and block.kind == "rate_limited"
    assert detect_block(404, {}, "You are in line (Queue-it)", rules) is None


def test_statuses_of_the_callers_choosing() -> None:
    rules = BlockRules(statuses={451: "blocked"})
    block = detect_block(451, {}, "", rules)
    assert block is not None and block.kind == "blocked"
    assert detect_block(403, {}, "", rules) is None
    assert DEFAULT_BLOCK_RULES.statuses == {403: "blocked", 429: "rate_limited"}


def test_retry_after() -> None:
    assert retry_after_seconds("120") == 120
    assert retry_after_seconds("Tue, 01 Jan 2030 00:01:00 GMT", now=1893456000.0) == 60
    for bad in (None, "", "soon", "-1"):
        assert retry_after_seconds(bad) is None


def test_headers_are_read_whatever_their_case() -> None:
    block = detect_block(403, {"CF-Mitigated": "challenge"}, "{}")
    assert block is not None and (block.kind, block.vendor) == ("captcha", "cloudflare")
