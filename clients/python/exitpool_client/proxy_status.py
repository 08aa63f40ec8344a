"""The HTTP proxy's ``Proxy-Status`` (RFC 9209), read as the structured field it is (RFC 8941):
a List with one member per intermediary, each a proxy name with parameters. ``details`` is a
String that may hold ``;`` and ``,``: only a structured-field parser reads it right."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

from .structured_fields import BareItem, StructuredFieldError, Token, parse_list

#: The name exitpool's proxies give themselves in Proxy-Status.
EXITPOOL_PROXY_NAME = "exitpool"


@dataclass(frozen=True)
class ProxyStatus:
    """One intermediary's member of Proxy-Status."""

    #: The intermediary's name (``exitpool`` for exitpool's proxies).
    proxy: str
    #: The RFC 9209 error type ('' when the member has none).
    error: str = ""
    #: The free text the proxy gave ('' when none).
    details: str = ""


def _text(value: Optional[BareItem]) -> str:
    # A String or a Token; anything else (a number, bytes, a boolean) is no text.
    return str(value) if isinstance(value, (str, Token)) else ""


def parse_proxy_status_list(value: Optional[str]) -> List[ProxyStatus]:
    """Every member of a Proxy-Status field value, the intermediary closest to the origin first;
    [] when the field is absent or not a valid structured field."""
    if not value or not value.strip():
        return []
    try:
        members = parse_list(value)
    except StructuredFieldError:
        return []
    out: List[ProxyStatus] = []
    for item, params in members:
        # A member is an Item naming the intermediary, never an Inner List.
        if isinstance(item, list):
            continue
        out.append(ProxyStatus(_text(item), _text(params.get("error")), _text(params.get("details"))))
    return out


def parse_proxy_status(value: Optional[str], proxy: str = EXITPOOL_PROXY_NAME) -> Optional[ProxyStatus]:
    """The member that proxy ``proxy`` (exitpool's by default) wrote, or None."""
    return next((m for m in parse_proxy_status_list(value) if m.proxy == proxy), None)
