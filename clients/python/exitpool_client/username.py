"""The proxy username exitpool reads (docs/api.md, "Session parameters in the username"), in
exitpool's own spelling: ``<key>[-country-<cc>,...][-ttl-<n>s][-mode-<mode>]``. The key's own
dashes are written as ``%2D`` when parameters follow, so any key reads back as itself."""

from __future__ import annotations

import re
from typing import Iterable, Optional
from urllib.parse import quote

#: The names the service reads as parameters, its own and the gateway dialects' (docs/api.md),
#: and the gateway parameters it refuses: a key with any of them between its dashes is escaped.
#: clients/test-vectors/usernames.json lists the same names; the tests hold both to it.
PARAMETER_NAMES = ("country", "cc", "sesstime", "sessionduration", "ttl", "mode", "session", "sessid")
UNSUPPORTED_PARAMETER_NAMES = ("city", "state", "st", "zip", "postalcode", "continent", "asn")
_ESCAPED_NAMES = frozenset(PARAMETER_NAMES + UNSUPPORTED_PARAMETER_NAMES)

#: The session modes.
MODES = ("sticky", "rotating")


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
        if isinstance(lifetime_seconds, bool) or not isinstance(lifetime_seconds, int) or lifetime_seconds < 1:
            raise InvalidSessionChoice("lifetime_seconds must be a whole number of seconds, at least 1")
        params.append(f"ttl-{lifetime_seconds}s")
    if mode is not None:
        if mode not in MODES:
            raise InvalidSessionChoice("mode is sticky or rotating")
        params.append(f"mode-{mode}")
    if not params:
        # A key with a parameter name between its dashes would read as parameters: said
        # explicitly (the default mode), its dashes escaped, it reads back as itself.
        if not any(piece.lower() in _ESCAPED_NAMES for piece in key.split("-")[1:]):
            return key
        params.append("mode-sticky")
    return quote(key, safe="").replace("-", "%2D") + "-" + "-".join(params)
