"""The ``domain`` a failure report names: the host of the site that showed the block, as exitpool's
API takes it (an A-label host name or an IPv4 address, lower-case, without a trailing dot). A host
the API would refuse with 400 (an IPv6 literal, a name with an underscore, over 253 characters) is
reported without a domain instead, so the report still counts."""

from __future__ import annotations

import re
from typing import Optional
from urllib.parse import urlsplit

_MAX_DOMAIN_LENGTH = 253
_DOMAIN_LABEL = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)")


def report_domain(url: Optional[str]) -> Optional[str]:
    if not url:
        return None
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        return None
    if not host or "[" in parts.netloc.rsplit("@", 1)[-1]:
        return None
    host = host.rstrip(".")
    try:
        # An IDN as its A-labels (xn--…), as a browser's URL parser writes it.
        host = host.encode("idna").decode("ascii")
    except UnicodeError:
        return None
    host = host.lower()
    if host == "" or len(host) > _MAX_DOMAIN_LENGTH:
        return None
    return host if all(_DOMAIN_LABEL.fullmatch(label) for label in host.split(".")) else None
