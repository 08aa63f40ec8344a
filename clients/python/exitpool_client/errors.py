"""The typed errors of the client: the proxy's refusals (read from its answer, or asked of the
service when the HTTP or SOCKS5 library hid them), a block the retries did not get past, a move
that found no new exit, and an API call that failed."""

from __future__ import annotations

from typing import Optional

from .blocks import Block
from .proxy_status import ProxyStatus

#: Refusals worth retrying later: the pool was busy, not asked for a country without exits.
RETRYABLE_REASONS = frozenset({"country_wait_timeout", "no_routable_instance", "session_limit"})


class ProxyRefusedError(Exception):
    """The HTTP proxy refused the request itself (the destination never saw it).

    ``reason`` is the service's (``no_exit_in_country``, ...) when it was asked because the
    library hid the proxy's answer (``source`` ``"service"``); None when read from the answer."""

    def __init__(self, status: int, proxy_status: ProxyStatus, reason: Optional[str] = None, source: str = "proxy") -> None:
        super().__init__(f"exitpool refused the request ({status} {proxy_status.error}{', ' + reason if reason else ''}): {proxy_status.details}")
        self.status = status
        self.proxy_status = proxy_status
        self.reason = reason
        self.source = source

    @property
    def bad_parameters(self) -> bool:
        """The username's parameters were malformed (HTTP 400)."""
        return self.status == 400

    @property
    def retryable(self) -> bool:
        """Waiting can help: the pool was busy (503), not a country without exits or a bad request."""
        if self.reason is not None:
            return self.reason in RETRYABLE_REASONS
        # Read from the proxy's answer: its details name a country without exits ("no exit in fr: …").
        return self.status == 503 and not self.proxy_status.details.startswith("no exit in")


SOCKS_REPLY_REASONS = {
    1: "general failure (no instance can serve the request)",
    2: "not allowed by ruleset (malformed session parameters in the username)",
    3: "network unreachable (no exit in the countries asked for)",
    4: "host unreachable",
    5: "connection refused by the destination",
}


class SocksReplyError(Exception):
    """The SOCKS5 proxy refused the connection with this reply code (RFC 1928)."""

    def __init__(self, code: int, reason: Optional[str] = None, details: str = "") -> None:
        super().__init__(f"the SOCKS5 proxy refused the connection: reply {code}, {SOCKS_REPLY_REASONS.get(code, 'unknown')}{': ' + details if details else ''}")
        self.code = code
        self.reason = reason
        self.details = details

    @property
    def retryable(self) -> bool:
        return self.reason in RETRYABLE_REASONS if self.reason is not None else self.code == 1


class StillBlockedError(Exception):
    """Every try was blocked; the last response is kept."""

    def __init__(self, block: Block, attempts: int, response: object) -> None:
        super().__init__(f"still blocked after {attempts} tries: {block.kind} ({block.reason})")
        self.block = block
        self.attempts = attempts
        self.response = response


class NoFreshExitError(Exception):
    """The session was moved after a block, but not to a new exit (``new_exit: false``): retrying
    would go back to an exit the site has seen, so the loop stops here. ``note`` is the service's
    reason (``exit_note``), ``exit_ip`` where the session is now."""

    def __init__(self, note: str, exit_ip: str, block: Block, response: object) -> None:
        super().__init__(f"no fresh exit after a {block.kind} block{': ' + note if note else ''}")
        self.note = note
        self.exit_ip = exit_ip
        self.block = block
        self.response = response


class ExitpoolApiError(Exception):
    """An API call made on the session's behalf failed."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"exitpool API answered {status}: {body.strip()[:200]}")
        self.status = status
        self.body = body
