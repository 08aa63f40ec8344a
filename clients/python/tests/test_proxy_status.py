"""Proxy-Status read as the structured field it is."""

from __future__ import annotations

from exitpool_client import ProxyStatus, parse_proxy_status, parse_proxy_status_list


def test_reads_the_field_exitpool_writes() -> None:
    assert parse_proxy_status('exitpool; error=destination_unavailable; details="no exit in fr: \\"x\\"; retry, later"') == ProxyStatus(
        "exitpool", "destination_unavailable", 'no exit in fr: "x"; retry, later'
    )


def test_finds_exitpools_member_among_others() -> None:
    field = 'cdn.example; error=http_upstream_503, exitpool; error=destination_unavailable; details="no exit in zz"; received-status=503'
    assert [m.proxy for m in parse_proxy_status_list(field)] == ["cdn.example", "exitpool"]
    assert parse_proxy_status(field) == ProxyStatus("exitpool", "destination_unavailable", "no exit in zz")
    assert parse_proxy_status('"exitpool"; error=dns_error') == ProxyStatus("exitpool", "dns_error", "")
    assert parse_proxy_status("other; error=dns_error") is None


def test_ignores_what_is_absent_or_malformed() -> None:
    for bad in (None, "", 'exitpool; details="unterminated', "exitpool; error=", "?", "exitpool;; error=x"):
        assert parse_proxy_status(bad) is None, bad
