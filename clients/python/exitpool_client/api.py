"""The calls a session makes on the pool's API with its proxy token (docs/api.md, "Sessions").

The API's redirects are followed, but the token goes only to the API's own origin: a redirect
to another host, port or scheme drops ``Authorization`` (as a browser's fetch does, and the Node
client with it)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from http.client import HTTPMessage
from typing import IO, Any, Dict, Optional, Tuple, TypedDict, cast
from urllib.parse import quote, urlsplit

from .errors import ExitpoolApiError

#: How long one API call may take: a rotation waits up to the service's FRESH_EXIT_WAIT_MS for a fresh exit.
API_TIMEOUT_SECONDS = 30.0


class _FailureAnswerBase(TypedDict):
    session: str
    instance: int
    kind: str
    scored: bool


class FailureAnswer(_FailureAnswerBase, total=False):
    """``POST /api/sessions/{key}/failure``'s answer; ``moved`` and the exit fields come from
    services that move a reported session themselves."""

    #: True: the pool already moved the session off the reported exit (do not rotate it again).
    moved: bool
    exit_ip: str
    #: Whether the session's exit now is outside its recent exits.
    new_exit: bool
    #: Why new_exit is false.
    exit_note: str


class RotateAnswer(TypedDict):
    """``POST /api/sessions/{key}/rotate``'s answer."""

    session: str
    instance: int
    exit_ip: str
    exit_confirmed: bool
    new_exit: bool
    exit_note: str


class Refusal(TypedDict):
    reason: str
    detail: str
    at: str
    age_ms: int
    http_status: int
    proxy_status_error: str
    socks_reply: int


class RefusalAnswer(TypedDict):
    """``GET /api/sessions/{key}/refusal``'s answer."""

    session: str
    refusal: Optional[Refusal]


def _origin(url: str) -> Tuple[str, str, Optional[int]]:
    parts = urlsplit(url)
    return parts.scheme.lower(), (parts.hostname or "").lower(), parts.port


class _TokenStaysHome(urllib.request.HTTPRedirectHandler):
    """Follows redirects, but drops the credential on one to another origin."""

    def redirect_request(self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str, headers: HTTPMessage, newurl: str) -> Optional[urllib.request.Request]:
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and _origin(newurl) != _origin(req.full_url):
            new.remove_header("Authorization")
        return new


class ExitpoolApi:
    def __init__(self, base: str, token: str, timeout: float = API_TIMEOUT_SECONDS) -> None:
        self.base = base.rstrip("/")
        self._token = token
        self._timeout = timeout
        # No proxy from the environment: the API is reached directly.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _TokenStaysHome())

    def _path(self, key: str, rest: str = "") -> str:
        return f"/api/sessions/{quote(key, safe='')}{rest}"

    def report(self, key: str, kind: str, reason: str, domain: Optional[str]) -> FailureAnswer:
        body: Dict[str, str] = {"kind": kind, "reason": reason}
        if domain:
            body["domain"] = domain
        return cast(FailureAnswer, self.call("POST", self._path(key, "/failure"), body))

    def rotate(self, key: str) -> RotateAnswer:
        return cast(RotateAnswer, self.call("POST", self._path(key, "/rotate")))

    def session(self, key: str) -> Dict[str, Any]:
        return cast(Dict[str, Any], self.call("GET", self._path(key)))

    def refusal(self, key: str) -> RefusalAnswer:
        return cast(RefusalAnswer, self.call("GET", self._path(key, "/refusal")))

    def call(self, method: str, path: str, body: Optional[Dict[str, str]] = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method, headers={"Authorization": f"Bearer {self._token}"})
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with self._opener.open(req, timeout=self._timeout) as r:
                text = cast(bytes, r.read()).decode()
        except urllib.error.HTTPError as e:
            raise ExitpoolApiError(e.code, e.read().decode(errors="replace")) from None
        return json.loads(text) if text else None
