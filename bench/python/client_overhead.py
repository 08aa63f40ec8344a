"""What exitpool_client adds per request with requests: the same requests through the same HTTP
proxy with a plain requests.Session and with ExitpoolSession.requests_session(), interleaved.
Environment as in test/support/python/client_scenario.py; prints JSON with the samples in ms."""

import json
import os
import sys
import time

import requests

from exitpool_client import ExitpoolSession


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    url = os.environ["TARGET_URL"]
    token = os.environ["EXITPOOL_TOKEN"]
    proxy = os.environ["EXITPOOL_HTTP"]
    plain = requests.Session()
    plain.trust_env = False
    plain.proxies = {"http": f"http://bench-py-plain:{token}@{proxy}", "https": f"http://bench-py-plain:{token}@{proxy}"}
    wrapped = ExitpoolSession("bench-py-client", token, api=os.environ["EXITPOOL_API"], http_proxy=proxy).requests_session()
    direct, client = [], []
    for _ in range(n):
        t = time.perf_counter()
        plain.get(url, timeout=30).text
        direct.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        wrapped.get(url, timeout=30).text
        client.append((time.perf_counter() - t) * 1000)
    print(json.dumps({"direct": direct, "client": client}))


if __name__ == "__main__":
    main()
