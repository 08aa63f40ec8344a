"""What the proxy said when it refused, as typed errors."""

from typing import Optional


def parse_proxy_status(value: Optional[str]) -> Optional[dict]:
    """``Proxy-Status: exitpool; error=<type>; details="<text>"`` as a dict (proxy, error, details)."""
    if not value:
        return None
    parts = [p.strip() for p in value.split(";")]
    out = {"proxy": parts[0], "error": "", "details": ""}
    for p in parts[1:]:
        if "=" not in p:
            continue
        name, v = p.split("=", 1)
        v = v.strip()
        if len(v) >= 2 and v[0] == '"' and v[-1] == '"':
            v = v[1:-1].replace('\\"', '"').replace("\\\\", "\\")
        if name.strip() in ("error", "details"):
            out[name.strip()] = v
    return out


class ProxyRefusedError(Exception):
    """The HTTP proxy refused the request itself (the destination never saw it)."""

    def __init__(self, status: int, proxy_status: dict):
        super().__init__(f"exitpool refused the request ({status} {proxy_status.get('error')}): {proxy_status.get('details')}")
        self.status = status
        self.proxy_status = proxy_status

    @property
    def retryable(self) -> bool:
        """Waiting can help: the pool was busy (503), not a country without exits or a bad request."""
        return self.status == 503 and not self.proxy_status.get("details", "").startswith("no exit in")


SOCKS_REPLY_REASONS = {
    1: "general failure (no instance can serve the request)",
    2: "not allowed by ruleset (malformed session parameters in the username)",
    3: "network unreachable (no exit in the countries asked for)",
    4: "host unreachable",
    5: "connection refused by the destination",
}


class SocksReplyError(Exception):
    """The SOCKS5 proxy refused the connection with this reply code."""

    def __init__(self, code: int):
        super().__init__(f"the SOCKS5 proxy refused the connection: reply {code}, {SOCKS_REPLY_REASONS.get(code, 'unknown')}")
        self.code = code


class StillBlockedError(Exception):
    """Every try was blocked; the last response is kept."""

    def __init__(self, block, attempts: int, response):
        super().__init__(f"still blocked after {attempts} tries: {block.kind} ({block.reason})")
        self.block = block
        self.attempts = attempts
        self.response = response


class ExitpoolApiError(Exception):
    """An API call made on the session's behalf failed."""

    def __init__(self, status: int, body: str):
        super().__init__(f"exitpool API answered {status}: {body.strip()[:200]}")
        self.status = status
        self.body = body
