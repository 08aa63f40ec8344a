"""The proxy username exitpool reads: ``<key>[-country-<cc>,...][-ttl-<n>s][-mode-rotating]``."""

import re
from typing import Iterable, Optional
from urllib.parse import quote

#: Names the service reads as parameters (docs/api.md).
PARAMETER_NAMES = ("country", "sesstime", "ttl", "mode", "session")


class InvalidSessionChoice(ValueError):
    """A choice the service would refuse, caught before any connection is made."""


def build_username(key: str, countries: Optional[Iterable[str]] = None, lifetime_seconds: Optional[int] = None, mode: Optional[str] = None) -> str:
    """The username for ``key`` with these choices; the key's dashes are escaped when needed."""
    if key == "":
        raise InvalidSessionChoice("the session key is empty")
    params = []
    codes = [c.lower() for c in (countries or [])]
    if codes:
        for c in codes:
            if not re.fullmatch(r"[a-z]{2}", c):
                raise InvalidSessionChoice(f"country {c!r} is not a two-letter ISO 3166 code")
        params.append("country-" + ",".join(dict.fromkeys(codes)))
    if lifetime_seconds is not None:
        if not isinstance(lifetime_seconds, int) or lifetime_seconds < 1:
            raise InvalidSessionChoice("lifetime_seconds must be a whole number of seconds, at least 1")
        params.append(f"ttl-{lifetime_seconds}s")
    if mode is not None:
        if mode not in ("sticky", "rotating"):
            raise InvalidSessionChoice("mode is sticky or rotating")
        params.append(f"mode-{mode}")
    if not params:
        # A key with a parameter name between its dashes would read as parameters: said
        # explicitly (the default mode), its dashes escaped, it reads back as itself.
        if not any(piece.lower() in PARAMETER_NAMES for piece in key.split("-")[1:]):
            return key
        params.append("mode-sticky")
    return quote(key, safe="").replace("-", "%2D") + "-" + "-".join(params)
