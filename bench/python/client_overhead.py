"""What exitpool_client adds per request with requests and with httpx: the same requests through
the same HTTP proxy with the bare library (a plain requests.Session, a plain httpx.Client) and
with the client's wrapper (ExitpoolSession.requests_session(), .httpx_client()), interleaved.
Environment as in test/support/python/client_scenario.py; prints JSON with the samples in ms."""

import json
import os
import sys
import time

import httpx
import requests

from exitpool_client import ExitpoolSession


def timed(send, direct, client, plain, wrapped, n):
    for _ in range(n):
        t = time.perf_counter()
        send(plain)
        direct.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        send(wrapped)
        client.append((time.perf_counter() - t) * 1000)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    url = os.environ["TARGET_URL"]
    token = os.environ["EXITPOOL_TOKEN"]
    proxy = os.environ["EXITPOOL_HTTP"]
    api = os.environ["EXITPOOL_API"]
    out = {}

    plain = requests.Session()
    plain.trust_env = False
    plain.proxies = {"http": f"http://bench-py-plain:{token}@{proxy}", "https": f"http://bench-py-plain:{token}@{proxy}"}
    wrapped = ExitpoolSession("bench-py-client", token, api=api, http_proxy=proxy).requests_session()
    out["requests"] = {"direct": [], "client": []}
    timed(lambda s: s.get(url, timeout=30).text, out["requests"]["direct"], out["requests"]["client"], plain, wrapped, n)

    session = ExitpoolSession("bench-py-httpx-client", token, api=api, http_proxy=proxy)
    plain_proxy = f"http://bench-py-httpx:{token}@{proxy}"
    version = tuple(int(p) for p in httpx.__version__.split(".")[:2])
    proxy_arg = {"proxy": plain_proxy} if version >= (0, 26) else {"proxies": plain_proxy}
    with httpx.Client(trust_env=False, timeout=30, **proxy_arg) as plain_x, session.httpx_client(timeout=30) as wrapped_x:
        out["httpx"] = {"direct": [], "client": []}
        timed(lambda c: c.get(url).text, out["httpx"]["direct"], out["httpx"]["client"], plain_x, wrapped_x, n)

    print(json.dumps(out))


if __name__ == "__main__":
    main()
