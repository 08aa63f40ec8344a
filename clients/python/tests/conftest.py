"""A fake exitpool for the client's tests: its HTTP proxy, its API and a site in one loopback
server, so that the loop (judge, report, move, retry) runs without a Tor network.

A request in absolute form (``GET http://site.test/...``, as a client sends it to an HTTP proxy)
is answered by the test's ``site`` function; a CONNECT is refused as ``connect_refusal`` says
(the refusal recorded for ``GET /api/sessions/{key}/refusal``); the API's session routes are
recorded. Each rotation (or move on a report) puts the session on the next exit (127.0.0.11,
.12, ...); after ``fresh_exits`` moves a move finds no new one. Connections are kept alive
(HTTP/1.1) and numbered, so a test can tell whether a client reused one.
"""

from __future__ import annotations

import base64
import itertools
import json
import re
import socket
import socketserver
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple
from urllib.parse import SplitResult, unquote, urlsplit

import pytest

from exitpool_client import ExitpoolSession

#: The shared test data: symbolic links into clients/test-vectors and clients/test-pages in the
#: repository, their files in an sdist.
DATA = Path(__file__).with_name("fixtures")

_API = re.compile(r"^/api/sessions/([^/]+)(/failure|/rotate|/refusal)?$")

Page = Tuple[int, Dict[str, str], str]
Site = Callable[[SplitResult], Page]


def proxy_username(header: str) -> str:
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic":
        return ""
    return base64.b64decode(value).decode().split(":", 1)[0]


def key_of(username: str) -> str:
    """The session key of a username the client built with countries (enough for these tests)."""
    return unquote(re.sub(r"-country-.*$", "", username))


class FakePool:
    def __init__(self, site: Site) -> None:
        self.site = site
        self.reports: List[Dict[str, str]] = []
        self.rotations: List[str] = []
        #: (url, connection number, exit, proxy username) for every request the proxy carried to the site.
        self.carried: List[Tuple[str, int, str, str]] = []
        #: (path, Authorization header) for every API request.
        self.api_authorizations: List[Tuple[str, Optional[str]]] = []
        #: How a failure report is answered: None as today's service (no move); else (moved, new_exit).
        self.report_answer: Optional[Tuple[bool, bool]] = None
        self.report_status = 200
        self.fresh_exits = 1_000_000
        #: (status, Proxy-Status) a CONNECT is refused with; None: 200.
        self.connect_refusal: Optional[Tuple[int, str]] = None
        self.refusal: Optional[Dict[str, Any]] = None
        self.api_redirect_to: Optional[str] = None
        #: Whether the proxy names the exit on responses (the service's EXIT_HEADER=1).
        self.exit_header = True
        self._moves = 0
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()
        pool = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            connection_number = 0

            def setup(self) -> None:
                super().setup()
                self.connection_number = next(pool._numbers)

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(self, status: int, body: str, headers: Optional[Dict[str, str]] = None, content_type: str = "text/plain; charset=utf-8") -> None:
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def _json(self, status: int, value: Any) -> None:
                self._send(status, json.dumps(value), content_type="application/json")

            def do_CONNECT(self) -> None:
                refusal = pool.connect_refusal
                if refusal is None:
                    self.send_response(200)
                    self.end_headers()
                    self.close_connection = True
                    return
                status, proxy_status = refusal
                pool.refusal = {"key": key_of(proxy_username(self.headers.get("Proxy-Authorization", ""))), "at": time.time(), "socks_reply": 3}
                self.close_connection = True
                self._send(status, "no exit in zz\n", {"Proxy-Status": proxy_status, "Connection": "close"})

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode() if length else ""
                if re.match(r"^https?://", self.path):
                    pool.carried.append((self.path, self.connection_number, pool.exit_ip(), proxy_username(self.headers.get("Proxy-Authorization", ""))))
                    status, headers, text = pool.site(urlsplit(self.path))
                    self._send(status, text, {**({"Exitpool-Exit": pool.exit_ip()} if pool.exit_header else {}), **headers})
                    return
                pool.api_authorizations.append((self.path, self.headers.get("Authorization")))
                if pool.api_redirect_to is not None:
                    self.send_response(307)
                    self.send_header("Location", pool.api_redirect_to + self.path)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                m = _API.match(self.path)
                key = unquote(m.group(1)) if m else ""
                if m and m.group(2) == "/failure" and self.command == "POST":
                    r = json.loads(body)
                    pool.reports.append({"key": key, "kind": r["kind"], "reason": r["reason"], "domain": r.get("domain", "")})
                    if pool.report_status != 200:
                        self._json(pool.report_status, {"error": "internal"})
                        return
                    answer: Dict[str, Any] = {"session": key, "instance": 0, "kind": r["kind"], "scored": True}
                    if pool.report_answer is not None:
                        moved, wants_new = pool.report_answer
                        fresh = moved and wants_new and pool.move()
                        new_exit = fresh or not moved
                        note = "" if new_exit else "no instance on an exit outside the session's last 5 exits"
                        answer.update(moved=moved, exit_ip=pool.exit_ip(), new_exit=new_exit, exit_note=note)
                    self._json(200, answer)
                elif m and m.group(2) == "/rotate" and self.command == "POST":
                    pool.rotations.append(key)
                    fresh = pool.move()
                    note = "" if fresh else "no instance on an exit outside the session's last 5 exits"
                    self._json(200, {"session": key, "instance": 0, "exit_ip": pool.exit_ip(), "exit_confirmed": True, "new_exit": fresh, "exit_note": note})
                elif m and m.group(2) == "/refusal" and self.command == "GET":
                    r2 = pool.refusal if pool.refusal is not None and pool.refusal["key"] == key else None
                    refusal = None
                    if r2 is not None:
                        refusal = {
                            "reason": "no_exit_in_country",
                            "detail": "no exit in zz: none in the exit catalog",
                            "at": "2030-01-01T00:00:00.000Z",
                            "age_ms": int((time.time() - r2["at"]) * 1000),
                            "http_status": 503,
                            "proxy_status_error": "destination_unavailable",
                            "socks_reply": r2["socks_reply"],
                        }
                    self._json(200, {"session": key, "refusal": refusal})
                elif m and m.group(2) is None and self.command == "GET":
                    self._json(200, {"key": key, "exit_ip": pool.exit_ip()})
                else:
                    self._json(404, {"error": "not_found"})

            do_GET = do_POST = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self._socks: List[socketserver.BaseServer] = []

    def move(self) -> bool:
        with self._lock:
            fresh = self._moves < self.fresh_exits
            self._moves += 1
            return fresh

    def exit_ip(self) -> str:
        return f"127.0.0.{11 + min(self._moves, self.fresh_exits)}"

    def session(self, key: str, **kwargs: Any) -> ExitpoolSession:
        return ExitpoolSession(key, "tp_test", api=f"http://{self.address}", http_proxy=self.address, **kwargs)

    def refuse_socks(self, reply: int) -> str:
        """A SOCKS5 listener refusing every CONNECT with ``reply`` after username/password
        authentication, the refusal recorded as the supervisor would; answers host:port."""
        pool = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                conn: socket.socket = self.request
                f = conn.makefile("rb")
                greeting = f.read(2)
                f.read(greeting[1])
                conn.sendall(bytes([5, 2]))
                head = f.read(2)
                username = f.read(head[1]).decode()
                f.read(f.read(1)[0])
                pool.refusal = {"key": key_of(username), "at": time.time(), "socks_reply": reply}
                conn.sendall(bytes([1, 0]))
                f.read(4)
                conn.sendall(bytes([5, reply, 0, 1, 0, 0, 0, 0, 0, 0]))

        server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self._socks.append(server)
        return f"127.0.0.1:{server.server_address[1]}"

    def close(self) -> None:
        for s in self._socks:
            s.shutdown()
            s.server_close()
        self.server.shutdown()
        self.server.server_close()


DEFAULT_PAGES: Dict[str, Page] = {
    "/start": (302, {"Location": "http://geo.captcha-delivery.com/captcha/?initialCid=abc"}, ""),
    "/account": (302, {"Location": "/login"}, ""),
    "/contest": (302, {"Location": "/coding-challenge-2026"}, ""),
    "/blocked": (403, {}, "Forbidden"),
    "/queue": (200, {}, "You are now in line (queue-it)"),
    "/held": (302, {"Location": "/hold/please"}, ""),
    "/hold/please": (200, {}, "One moment"),
    "/cross": (302, {"Location": "http://www.site.test/landing"}, ""),
}


def default_site(url: SplitResult) -> Page:
    """``/start`` redirects to DataDome's captcha host; ``/account`` to a login page; ``/contest`` to
    a path that says "challenge"; ``/blocked`` is a 403; ``/queue`` a waiting room no default rule
    knows; ``/held`` redirects to ``/hold/please``, a challenge no default rule knows; ``/cross``
    redirects to another host that answers 403; anything else is a page."""
    if url.hostname == "geo.captcha-delivery.com":
        return (200, {}, "One moment")
    if url.hostname == "www.site.test":
        return (403, {}, "Forbidden")
    return DEFAULT_PAGES.get(url.path, (200, {}, "welcome"))


@pytest.fixture
def fake_pool() -> Iterator[FakePool]:
    pool = FakePool(default_site)
    yield pool
    pool.close()
