"""Honest moves after a block (fake pool: conftest): the report's answer with and without
``moved``, a move that finds no new exit, one report per block event, a report that fails."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import List
from urllib.parse import SplitResult

import pytest

from exitpool_client import ExitpoolSession, NoFreshExitError, StillBlockedError
from exitpool_client.api import RotateAnswer

from conftest import FakePool, Page


def _exits(fake_pool: FakePool) -> List[str]:
    return [exit_ip for _, _, exit_ip, _ in fake_pool.carried]


def test_a_report_without_moved_the_client_rotates_itself(fake_pool: FakePool) -> None:
    s = fake_pool.session("no-moved")
    with s.requests_session() as http, pytest.raises(StillBlockedError):
        http.get("http://site.test/blocked", timeout=10)
    assert len(fake_pool.reports) == 3
    assert len(fake_pool.rotations) == 2, "a rotation between tries"
    assert _exits(fake_pool) == ["127.0.0.11", "127.0.0.12", "127.0.0.13"]


def test_moved_false_the_client_rotates(fake_pool: FakePool) -> None:
    fake_pool.report_answer = (False, True)
    s = fake_pool.session("moved-false", attempts=2)
    with s.requests_session() as http, pytest.raises(StillBlockedError):
        http.get("http://site.test/blocked", timeout=10)
    assert len(fake_pool.rotations) == 1
    assert _exits(fake_pool) == ["127.0.0.11", "127.0.0.12"]


def test_moved_true_the_client_does_not_rotate_again(fake_pool: FakePool) -> None:
    fake_pool.report_answer = (True, True)
    s = fake_pool.session("moved-true")
    with s.httpx_client(timeout=10) as client, pytest.raises(StillBlockedError):
        client.get("http://site.test/blocked")
    assert fake_pool.rotations == [], "never a second move"
    assert len(fake_pool.reports) == 3
    assert len(set(_exits(fake_pool))) == 3, "each try through a new exit"
    assert s.exit == fake_pool.exit_ip()


def test_moved_without_a_new_exit_stops_with_no_fresh_exit(fake_pool: FakePool) -> None:
    fake_pool.report_answer = (True, False)
    s = fake_pool.session("moved-stale")
    with s.requests_session() as http, pytest.raises(NoFreshExitError) as e:
        http.get("http://site.test/blocked", timeout=10)
    assert "last 5 exits" in e.value.note
    assert e.value.block.kind == "blocked"
    assert len(fake_pool.carried) == 1, "no try after it"
    assert fake_pool.rotations == []


def test_a_rotation_without_a_new_exit_stops_and_never_retries_on_the_reported_exit(fake_pool: FakePool) -> None:
    fake_pool.fresh_exits = 1
    s = fake_pool.session("rotation-stale", attempts=5)

    async def run() -> None:
        async with s.httpx_async_client(timeout=10) as client:
            await client.get("http://site.test/blocked")

    with pytest.raises(NoFreshExitError) as e:
        asyncio.run(run())
    assert e.value.exit_ip == "127.0.0.12"
    assert _exits(fake_pool) == ["127.0.0.11", "127.0.0.12"], "one new exit, then the stop"
    assert len(fake_pool.rotations) == 2


def test_parallel_requests_blocked_on_one_exit_file_one_report() -> None:
    blocked = threading.Event()
    blocked.set()

    def site(url: SplitResult) -> Page:
        return (403, {}, "Forbidden") if blocked.is_set() else (200, {}, "welcome")

    class UnblockedByTheMove(ExitpoolSession):
        def rotate(self) -> RotateAnswer:
            blocked.clear()
            return super().rotate()

    pool = FakePool(site)
    try:
        s = UnblockedByTheMove("parallel", "tp_test", api=f"http://{pool.address}", http_proxy=pool.address)
        with s.requests_session() as http, ThreadPoolExecutor(6) as threads:
            pages = list(threads.map(lambda _: http.get("http://site.test/p", timeout=10).text, range(6)))
        assert pages == ["welcome"] * 6
        assert len(pool.reports) == 1, "one report for one block event"
        assert len(pool.rotations) == 1
    finally:
        pool.close()


def test_a_failed_report_does_not_stop_the_loop(fake_pool: FakePool) -> None:
    fake_pool.report_status = 500
    failed: List[BaseException] = []
    s = fake_pool.session("report-fails", attempts=2, on_report_failed=failed.append)
    with s.requests_session() as http, pytest.raises(StillBlockedError):
        http.get("http://site.test/blocked", timeout=10)
    assert len(failed) == 2
    assert len(fake_pool.rotations) == 1


def test_a_later_block_on_the_same_exit_is_reported_again(fake_pool: FakePool) -> None:
    s = fake_pool.session("one-try", attempts=1)
    with s.requests_session() as http:
        for _ in range(2):
            with pytest.raises(StillBlockedError):
                http.get("http://site.test/blocked", timeout=10)
    assert len(fake_pool.reports) == 2
    assert fake_pool.rotations == []
