"""A fake exitpool for the client's tests: its HTTP proxy, its API and a site in one loopback
server, so that the loop (judge, report, rotate, retry) runs without a Tor network.

A request in absolute form (``GET http://site.test/...``, as a client sends it to an HTTP proxy)
is answered by the test's ``site`` function; ``/api/sessions/{key}/failure``, ``/rotate`` and
``GET /api/sessions/{key}`` are the pool's API, recorded. Connections are kept alive (HTTP/1.1)
and numbered, so a test can tell whether a client reused one.
"""

import base64
import itertools
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

import pytest

_API = re.compile(r"^/api/sessions/([^/]+)(/failure|/rotate)?$")


def _proxy_username(header: str) -> str:
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic":
        return ""
    return base64.b64decode(value).decode().split(":", 1)[0]


class FakePool:
    def __init__(self, site):
        self.site = site
        self.reports = []
        self.rotations = []
        #: (url, connection number) for every request the proxy carried to the site.
        self.carried = []
        #: (url, proxy username) for the same requests.
        self.users = []
        self._numbers = itertools.count(1)
        pool = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self):
                super().setup()
                self.connection_number = next(pool._numbers)

            def log_message(self, *args):
                pass

            def _send(self, status, body, headers=None, content_type="text/plain; charset=utf-8"):
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def _handle(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode() if length else ""
                if re.match(r"^https?://", self.path):
                    pool.carried.append((self.path, self.connection_number))
                    pool.users.append((self.path, _proxy_username(self.headers.get("Proxy-Authorization", ""))))
                    status, headers, text = pool.site(urlsplit(self.path))
                    self._send(status, text, {"Exitpool-Exit": pool.exit_ip(), **headers})
                    return
                m = _API.match(self.path)
                key = unquote(m.group(1)) if m else ""
                if m and m.group(2) == "/failure" and self.command == "POST":
                    r = json.loads(body)
                    pool.reports.append({"key": key, "kind": r["kind"], "reason": r["reason"], "domain": r.get("domain", "")})
                    self._send(200, json.dumps({"session": key, "kind": r["kind"], "scored": True}), content_type="application/json")
                elif m and m.group(2) == "/rotate" and self.command == "POST":
                    pool.rotations.append(key)
                    self._send(200, json.dumps({"session": key, "exit_ip": pool.exit_ip()}), content_type="application/json")
                elif m and m.group(2) is None and self.command == "GET":
                    self._send(200, json.dumps({"key": key, "exit_ip": pool.exit_ip()}), content_type="application/json")
                else:
                    self._send(404, json.dumps({"error": "not_found"}), content_type="application/json")

            do_GET = do_POST = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def exit_ip(self) -> str:
        return f"127.0.0.{11 + len(self.rotations)}"

    def session(self, key, **kwargs):
        from exitpool_client import ExitpoolSession

        return ExitpoolSession(key, "tp_test", api=f"http://{self.address}", http_proxy=self.address, **kwargs)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


DEFAULT_PAGES = {
    "/start": (302, {"Location": "/sorry/wait?next=%2Fstart"}, ""),
    "/sorry/wait": (200, {}, "One moment"),
    "/account": (302, {"Location": "/login"}, ""),
    "/blocked": (403, {}, "Forbidden"),
    "/queue": (200, {}, "You are now in line (queue-it)"),
    "/held": (302, {"Location": "/hold/please"}, ""),
    "/hold/please": (200, {}, "One moment"),
}


def default_site(url):
    """``/start`` redirects to a challenge whose page has no marker; ``/account`` to a login
    page; ``/blocked`` is a 403; ``/queue`` a waiting room no default rule knows; ``/held``
    redirects to ``/hold/please``, a challenge no default rule knows; anything else is a page."""
    return DEFAULT_PAGES.get(url.path, (200, {}, "welcome"))


@pytest.fixture
def fake_pool():
    pool = FakePool(default_site)
    yield pool
    pool.close()
