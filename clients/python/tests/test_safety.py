"""The token stays with the API: a redirect of the API to another origin is followed without it."""

from __future__ import annotations

from conftest import FakePool, default_site


def test_the_token_never_goes_to_another_origin(fake_pool: FakePool) -> None:
    other = FakePool(default_site)
    try:
        fake_pool.api_redirect_to = f"http://{other.address}"
        s = fake_pool.session("redirected-api")
        assert s.current_exit() == other.exit_ip(), "answered by the other origin"
        assert fake_pool.api_authorizations[-1][1] == "Bearer tp_test"
        assert other.api_authorizations, "the redirect was followed"
        assert all(auth is None for _, auth in other.api_authorizations)
    finally:
        other.close()


def test_the_token_follows_a_redirect_within_the_origin(fake_pool: FakePool) -> None:
    fake_pool.api_redirect_to = f"http://{fake_pool.address}/moved"
    s = fake_pool.session("same-origin")
    try:
        s.current_exit()
    except Exception:  # noqa: BLE001 - the fake redirects every path, until urllib gives up: only the headers matter here
        pass
    moved = [auth for path, auth in fake_pool.api_authorizations if path.startswith("/moved")]
    assert moved and all(auth == "Bearer tp_test" for auth in moved)
