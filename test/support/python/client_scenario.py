"""Drives the Python client (clients/python) for test/e2e/client-python.test.ts.

usage: client_scenario.py requests|requests-socks|requests-blocked|httpx|httpx-async|refused|
       signin|redirects|no-fresh-exit|refusal|usernames
Configuration from the environment: EXITPOOL_API, EXITPOOL_TOKEN, EXITPOOL_HTTP, EXITPOOL_SOCKS,
TARGET_URL, SESSION_KEY, COUNTRIES (comma-separated, optional), ATTEMPTS (optional), SITE_URL
(the test site's base URL, for signin and redirects), CLIENT (requests, httpx or httpx-async) and
LISTENER (http or socks5) for refusal. Prints one JSON object.
"""

import asyncio
import json
import os
import sys

from exitpool_client import ExitpoolSession, NoFreshExitError, ProxyRefusedError, SocksReplyError, StillBlockedError, build_username


def session() -> ExitpoolSession:
    countries = [c for c in os.environ.get("COUNTRIES", "").split(",") if c]
    return ExitpoolSession(
        os.environ["SESSION_KEY"],
        os.environ["EXITPOOL_TOKEN"],
        api=os.environ["EXITPOOL_API"],
        http_proxy=os.environ["EXITPOOL_HTTP"],
        socks_proxy=os.environ["EXITPOOL_SOCKS"],
        countries=countries or None,
        attempts=int(os.environ.get("ATTEMPTS", "3")),
    )


def main() -> None:
    scenario = sys.argv[1]
    url = os.environ.get("TARGET_URL", "")
    if scenario == "usernames":
        cases = json.load(sys.stdin)
        print(json.dumps([build_username(c["key"], c.get("countries"), c.get("lifetime"), c.get("mode")) for c in cases]))
        return
    s = session()
    if scenario in ("requests", "requests-socks"):
        with s.requests_session("socks5h" if scenario == "requests-socks" else "http") as http:
            r = http.get(url, timeout=30)
            print(json.dumps({"status": r.status_code, "body": r.text.strip(), "exit": s.exit}))
    elif scenario == "requests-blocked":
        # Every exit blocked: the bound is reached; rotations are counted on the session itself.
        rotations = []
        rotate = s.rotate

        def counted_rotate():
            rotations.append(rotate())
            return rotations[-1]

        s.rotate = counted_rotate
        try:
            with s.requests_session() as http:
                r = http.get(url, timeout=30)
            print(json.dumps({"error": None, "status": r.status_code}))
        except StillBlockedError as e:
            print(json.dumps({"error": "StillBlockedError", "attempts": e.attempts, "kind": e.block.kind, "status": e.response.status_code, "rotations": len(rotations)}))
        except NoFreshExitError as e:
            print(json.dumps({"error": "NoFreshExitError", "kind": e.block.kind, "rotations": len(rotations)}))
    elif scenario == "httpx":
        with s.httpx_client(timeout=30) as client:
            r = client.get(url)
            print(json.dumps({"status": r.status_code, "body": r.text.strip(), "exit": s.exit}))
    elif scenario == "httpx-async":

        async def run():
            async with s.httpx_async_client(timeout=30) as client:
                r = await client.get(url)
                return {"status": r.status_code, "body": r.text.strip(), "exit": s.exit}

        print(json.dumps(asyncio.run(run())))
    elif scenario == "signin":
        # A 200 sign-in page with a reCAPTCHA widget: an ordinary page, no report.
        site = os.environ["SITE_URL"]
        with s.requests_session() as http:
            first = http.get(site + "/signin", timeout=30)
        with s.httpx_client(timeout=30) as client:
            second = client.get(site + "/signin")
        print(json.dumps({"status": [first.status_code, second.status_code], "widget": ["g-recaptcha" in first.text, "g-recaptcha" in second.text]}))
    elif scenario == "redirects":
        site = os.environ["SITE_URL"]
        out = {}
        with s.requests_session() as http:
            try:
                http.get(site + "/cross", timeout=30)
            except StillBlockedError as e:
                out["cross"] = e.block.kind
            out["contest"] = http.get(site + "/contest", timeout=30).status_code
            try:
                http.get(site + "/to-challenge", timeout=30, allow_redirects=False)
            except StillBlockedError as e:
                out["to-challenge"] = [e.block.kind, e.block.vendor]
        print(json.dumps(out))
    elif scenario == "no-fresh-exit":
        try:
            with s.requests_session() as http:
                http.get(url, timeout=30)
            print(json.dumps({"error": None}))
        except NoFreshExitError as e:
            print(json.dumps({"error": "NoFreshExitError", "note": e.note, "kind": e.block.kind}))
    elif scenario == "refusal":
        # One cell of the refusal matrix: the typed error this client raises on this listener.
        client, listener = os.environ["CLIENT"], os.environ["LISTENER"]
        try:
            if client == "requests":
                with s.requests_session("socks5h" if listener == "socks5" else "http") as http:
                    http.get(url, timeout=30)
            elif client == "httpx":
                with s.httpx_client("socks5" if listener == "socks5" else "http", timeout=30) as c:
                    c.get(url)
            else:

                async def fetch():
                    async with s.httpx_async_client("socks5" if listener == "socks5" else "http", timeout=30) as c:
                        await c.get(url)

                asyncio.run(fetch())
            print(json.dumps({"error": None}))
        except ProxyRefusedError as e:
            print(json.dumps({"error": "ProxyRefusedError", "status": e.status, "reason": e.reason, "source": e.source, "retryable": e.retryable}))
        except SocksReplyError as e:
            print(json.dumps({"error": "SocksReplyError", "code": e.code, "reason": e.reason, "retryable": e.retryable}))
    elif scenario == "refused":
        out = {}
        try:
            with s.requests_session() as http:
                http.get(url, timeout=30)
        except ProxyRefusedError as e:
            out["http"] = {"status": e.status, "details": e.proxy_status.details, "retryable": e.retryable}
        try:
            with s.requests_session("socks5h") as http:
                http.get(url, timeout=30)
        except SocksReplyError as e:
            out["socks"] = {"code": e.code}
        print(json.dumps(out))
    else:
        raise SystemExit(f"unknown scenario {scenario}")


if __name__ == "__main__":
    main()
