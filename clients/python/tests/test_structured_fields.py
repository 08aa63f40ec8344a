"""The RFC 8941 parser against the RFC's own examples (sections 3 and 4), and what it refuses."""

from __future__ import annotations

from decimal import Decimal
from typing import Callable

import pytest

from exitpool_client.structured_fields import StructuredFieldError, Token, is_inner_list, parse_dictionary, parse_item, parse_list


def test_lists() -> None:
    # 3.1
    assert parse_list("sugar, tea, rum") == [(Token("sugar"), {}), (Token("tea"), {}), (Token("rum"), {})]
    assert parse_list("sugar,tea,rum") == parse_list("sugar,   tea,  rum")
    assert parse_list("") == []


def test_inner_lists() -> None:
    # 3.1.1
    assert parse_list('("foo" "bar"), ("baz"), ("bat" "one"), ()') == [
        ([("foo", {}), ("bar", {})], {}),
        ([("baz", {})], {}),
        ([("bat", {}), ("one", {})], {}),
        ([], {}),
    ]
    members = parse_list('("foo"; a=1;b=2);lvl=5, ("bar" "baz");lvl=1')
    assert members == [([("foo", {"a": 1, "b": 2})], {"lvl": 5}), ([("bar", {}), ("baz", {})], {"lvl": 1})]
    assert is_inner_list(members[0]) and not is_inner_list(parse_list("a")[0])


def test_parameters() -> None:
    # 3.1.2
    assert parse_list('abc;a=1;b=2; cde_456, (ghi;jk=4 l);q="9";r=w') == [
        (Token("abc"), {"a": 1, "b": 2, "cde_456": True}),
        ([(Token("ghi"), {"jk": 4}), (Token("l"), {})], {"q": "9", "r": Token("w")}),
    ]


def test_dictionaries() -> None:
    # 3.2
    assert parse_dictionary('en="Applepie", da=:w4ZibGV0w6ZydGUK:') == {"en": ("Applepie", {}), "da": ("Æbletærte\n".encode(), {})}
    assert parse_dictionary("a=?0, b, c; foo=bar") == {"a": (False, {}), "b": (True, {}), "c": (True, {"foo": Token("bar")})}
    assert parse_dictionary("rating=1.5, feelings=(joy sadness)") == {"rating": (Decimal("1.5"), {}), "feelings": ([(Token("joy"), {}), (Token("sadness"), {})], {})}
    assert parse_dictionary("a=(1 2), b=3, c=4;aa=bb, d=(5 6);valid") == {
        "a": ([(1, {}), (2, {})], {}),
        "b": (3, {}),
        "c": (4, {"aa": Token("bb")}),
        "d": ([(5, {}), (6, {})], {"valid": True}),
    }


def test_items() -> None:
    # 3.3 and its bare items
    assert parse_item("5; foo=bar") == (5, {"foo": Token("bar")})
    assert parse_item("42") == (42, {})
    assert parse_item("-42") == (-42, {})
    assert parse_item("4.5") == (Decimal("4.5"), {})
    assert parse_item('"hello world"') == ("hello world", {})
    assert parse_item('"say \\"hi\\", \\\\ ok"') == ('say "hi", \\ ok', {})
    assert parse_item("foo123/456") == (Token("foo123/456"), {})
    assert parse_item(":cHJldGVuZCB0aGlzIGlzIGJpbmFyeSBjb250ZW50Lg==:") == (b"pretend this is binary content.", {})
    assert parse_item("?1") == (True, {})
    assert parse_item("?0") == (False, {})


@pytest.mark.parametrize(
    "parse, text",
    [
        (parse_item, '"unterminated'),
        (parse_item, "1.2345"),
        (parse_item, "1234567890123456"),
        (parse_item, "1234567890123.1"),
        (parse_item, '"bad \\x escape"'),
        (parse_item, "?2"),
        (parse_item, ":not base64!:"),
        (parse_item, "é"),
        (parse_item, "abc;"),
        (parse_item, "1."),
        (parse_item, "--1"),
        (parse_item, "a b"),
        (parse_list, "a, b,"),
        (parse_list, "(a b"),
        (parse_list, "a;b=?"),
        (parse_dictionary, "A=1"),
        (parse_dictionary, "a=1,,b=2"),
    ],
)
def test_refusals(parse: Callable[[str], object], text: str) -> None:
    with pytest.raises(StructuredFieldError):
        parse(text)


def test_proxy_status_as_exitpool_writes_it() -> None:
    # A details string with ; and , and quotes: what a split(";") cut in two.
    (item, params), = parse_list('exitpool; error=http_request_error; details="session parameters: \\"zone\\" after country-de; write it as %2D, then"')
    assert item == Token("exitpool")
    assert params == {"error": Token("http_request_error"), "details": 'session parameters: "zone" after country-de; write it as %2D, then'}
