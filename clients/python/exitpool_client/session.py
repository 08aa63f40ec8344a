"""One exitpool session: its username and proxies, what to do when a site blocks it, and what
the proxy's refusals were. The clients (requests, httpx, Scrapy) are in modules of their own."""

from __future__ import annotations

import re
import threading
from dataclasses import replace
from time import monotonic
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Mapping, Optional, Protocol, Tuple, Type, TypeVar
from urllib.parse import quote

from .api import ExitpoolApi, FailureAnswer, RotateAnswer
from .blocks import DEFAULT_BLOCK_RULES, BanPolicy, Block, BlockRules, ResponseFacts, ban_policy_of
from .errors import NoFreshExitError, ProxyRefusedError, SocksReplyError, StillBlockedError
from .proxy_status import EXITPOOL_PROXY_NAME, ProxyStatus, parse_proxy_status
from .report_domain import report_domain
from .username import build_username

if TYPE_CHECKING:  # pragma: no cover - the clients are optional
    import httpx
    import requests

#: A refusal the service reports is this request's when it is no older than the request, give or
#: take this much (only the two clocks' rates matter: ``age_ms`` is compared with time since sending).
REFUSAL_CLOCK_SLACK_SECONDS = 0.25

#: Content types whose body the ban policy reads (pages and API answers, not downloads).
_TEXTUAL = re.compile(r"^(text/|application/(json|xhtml\+xml|xml|javascript)|[a-z]+/[a-z.+-]*\+(json|xml))", re.I)

R = TypeVar("R", bound="ClientResponse")


class ClientResponse(Protocol):
    """What the loop reads of a requests or httpx response."""

    @property
    def status_code(self) -> int: ...

    @property
    def headers(self) -> Any: ...

    @property
    def text(self) -> str: ...

    @property
    def history(self) -> Any: ...


def followed_redirects(response: ClientResponse) -> List[str]:
    """Where the redirects a requests or httpx response followed led, the final URL last."""
    history = list(getattr(response, "history", None) or [])
    if not history:
        return []
    return [str(r.url) for r in history[1:]] + [str(getattr(response, "url", ""))]


def textual(headers: Mapping[str, str]) -> bool:
    return bool(_TEXTUAL.match(headers.get("content-type") or headers.get("Content-Type") or ""))


class _Once:
    """A call the first thread to ask makes; the others wait for it and share its outcome."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._started = False
        self._error: Optional[BaseException] = None

    def run(self, fn: Callable[[], None]) -> None:
        with self._lock:
            first = not self._started
            self._started = True
        if first:
            try:
                fn()
            except BaseException as e:
                self._error = e
            finally:
                self._done.set()
        else:
            self._done.wait()
        if self._error is not None:
            raise self._error


class _BlockEvent:
    """Blocks met on one exit of the session while its report (and the move after it) is in
    flight: reported once, moved once; closed when its report is done and nobody asked for a
    move, so that a later block on the same exit is an event of its own."""

    def __init__(self, generation: int) -> None:
        self.generation = generation
        self.reported = _Once()
        self.moved = _Once()
        self.move_asked = False
        self.closed = False


class ExitpoolSession:
    """A session key with its choices, and what to do when a site blocks it.

    The clients (``requests_session``, ``httpx_client``, ``httpx_async_client``, the Scrapy
    middleware) judge every response by ``ban_policy`` (the default reads challenge pages and
    status codes, not words: blocks.py). A block is reported to the pool with its kind and the
    site's domain, once per block event however many requests met it; the session is moved to a
    new exit (by the pool itself when the report's answer says ``moved``, else by a rotation), and
    the request tried again, at most ``attempts`` times in all, then ``StillBlockedError``. A move
    that finds no new exit stops with ``NoFreshExitError``. The proxy's refusals raise
    ``ProxyRefusedError`` (HTTP proxy) or ``SocksReplyError`` (SOCKS5), asked of the service when
    the library hid them. ``exit`` is the exit IP last seen (the ``Exitpool-Exit`` header when the
    service sends it, the answers of moves, else ``current_exit()``).
    """

    def __init__(
        self,
        key: str,
        token: str,
        api: str = "http://127.0.0.1:8080",
        http_proxy: str = "127.0.0.1:9251",
        socks_proxy: str = "127.0.0.1:9250",
        countries: Optional[Iterable[str]] = None,
        lifetime_seconds: Optional[int] = None,
        mode: Optional[str] = None,
        rules: BlockRules = DEFAULT_BLOCK_RULES,
        attempts: int = 3,
        ban_policy: Optional[BanPolicy] = None,
        on_report_failed: Optional[Callable[[BaseException], None]] = None,
    ) -> None:
        self.key = key
        self.token = token
        self.api = api.rstrip("/")
        self.http_proxy = http_proxy
        self.socks_proxy = socks_proxy
        self.username = build_username(key, countries, lifetime_seconds, mode)
        self.rules = rules
        self.ban_policy: BanPolicy = ban_policy if ban_policy is not None else ban_policy_of(rules)
        self.attempts = max(1, attempts)
        self.on_report_failed = on_report_failed
        self.exit = ""
        self._api = ExitpoolApi(self.api, token)
        self._lock = threading.Lock()
        self._generation = 0
        self._event: Optional[_BlockEvent] = None

    # ---- proxy addresses ----

    def proxy_url(self, scheme: str = "http") -> str:
        """``http://`` (the HTTP proxy) or ``socks5h://`` (SOCKS5, names resolved by the exit)."""
        cred = f"{quote(self.username, safe='')}:{quote(self.token, safe='')}@"
        if scheme == "http":
            return f"http://{cred}{self.http_proxy}"
        if scheme in ("socks5h", "socks5"):
            return f"{scheme}://{cred}{self.socks_proxy}"
        raise ValueError("scheme is http, socks5h or socks5")

    def proxies(self, scheme: str = "http") -> Dict[str, str]:
        url = self.proxy_url(scheme)
        return {"http": url, "https": url}

    @property
    def generation(self) -> int:
        """Goes up each time the session moves to another exit: a client drops the connections it
        kept to the old one when it sees it change."""
        return self._generation

    # ---- the pool's API ----

    def report(self, block: Block) -> Optional[FailureAnswer]:
        """Tells the pool what the site did (exitpool cannot see inside TLS), naming the site's
        domain when the API can take it. A report that fails goes to ``on_report_failed`` and
        answers None: it never stops the request loop."""
        try:
            return self._api.report(self.key, block.kind, block.reason, report_domain(block.site))
        except Exception as e:  # noqa: BLE001 - whatever failed, the loop goes on
            if self.on_report_failed is not None:
                self.on_report_failed(e)
            return None

    def rotate(self) -> RotateAnswer:
        """Moves the session to a new exit; the clients open new connections through it."""
        answer = self._api.rotate(self.key)
        self._moved_to(answer.get("exit_ip", ""))
        return answer

    def current_exit(self) -> str:
        view = self._api.session(self.key)
        self.exit = str(view.get("exit_ip", "")) if view else ""
        return self.exit

    def _moved_to(self, exit_ip: str) -> None:
        with self._lock:
            self._generation += 1
            self.exit = exit_ip

    # ---- judging a response ----

    def judge(self, status: int, headers: Mapping[str, str], text: str, url: str, redirected_to: Iterable[str] = ()) -> Optional[Block]:
        """Raises ProxyRefusedError on the proxy's own refusal; returns the block the ban policy
        sees (its ``site`` set), or None for a good response. Reports nothing."""
        self.note_proxy_answer(status, headers)
        followed = [str(u) for u in redirected_to]
        block = self.ban_policy(ResponseFacts(status, headers, text or "", str(url), followed))
        if block is not None and block.site is None:
            block = replace(block, site=followed[-1] if followed else str(url))
        return block

    def note_proxy_answer(self, status: int, headers: Mapping[str, str]) -> None:
        """What the proxy itself said on a response: its refusal raises ProxyRefusedError; the
        exit it names (``Exitpool-Exit``) becomes ``exit``."""
        refusal = parse_proxy_status(headers.get("proxy-status"), EXITPOOL_PROXY_NAME)
        if refusal is not None and status >= 400:
            raise ProxyRefusedError(status, refusal)
        named = headers.get("exitpool-exit")
        if named:
            self.exit = named

    def judge_response(self, response: ClientResponse, url: str) -> Optional[Block]:
        """``judge`` for a requests or httpx response."""
        text = response.text if textual(response.headers) else ""
        return self.judge(response.status_code, response.headers, text, url, followed_redirects(response))

    def after_block(self, block: Block, generation: int, try_again: bool, response: object, left_from: Optional[str] = None) -> None:
        """What follows a block met on exit ``generation``: it is reported once (concurrent
        requests that met the same block on the same exit join that report); when another try
        follows (``try_again``), the session is moved once: by the pool itself when the report's
        answer says so (``moved``), else by a rotation. A request whose exit already changed since
        it left just tries again. A move to an exit that is not new (``new_exit: false``, or the
        exit just left) raises NoFreshExitError."""
        leaving = self.exit if left_from is None else left_from
        with self._lock:
            if generation != self._generation:
                return
            event = self._event
            if event is None or event.generation != generation or event.closed:
                event = self._event = _BlockEvent(generation)
        event.reported.run(lambda: self._report_and_take_move(block, generation, response))
        with self._lock:
            if not try_again or generation != self._generation:
                if not event.move_asked:
                    event.closed = True
                return
            event.move_asked = True
        event.moved.run(lambda: self._rotate_after(block, generation, response, leaving))

    def _report_and_take_move(self, block: Block, generation: int, response: object) -> None:
        answer = self.report(block)
        if answer is None or answer.get("moved") is not True or generation != self._generation:
            return
        self._moved_to(answer.get("exit_ip", ""))
        if answer.get("new_exit") is False:
            raise NoFreshExitError(answer.get("exit_note", ""), self.exit, block, response)

    def _rotate_after(self, block: Block, generation: int, response: object, leaving: str) -> None:
        if generation != self._generation:
            return
        answer = self.rotate()
        if answer.get("new_exit") is False or (leaving and answer.get("exit_ip") == leaving):
            raise NoFreshExitError(answer.get("exit_note") or f"still on {answer.get('exit_ip', '')}", answer.get("exit_ip", ""), block, response)

    def refusal_behind(self, error: BaseException, elapsed_seconds: float, listener: str = "http") -> BaseException:
        """Why a request failed without an answer: the proxy's refusal when the service recorded
        one for this session since the request left (``GET /api/sessions/{key}/refusal``, asked
        once), as ProxyRefusedError (``listener`` "http") or SocksReplyError ("socks5"); else
        ``error`` itself."""
        if isinstance(error, (ProxyRefusedError, SocksReplyError)):
            return error
        try:
            answer = self._api.refusal(self.key)
        except Exception:  # noqa: BLE001 - the API's own trouble: the library's error stands
            return error
        r = answer.get("refusal")
        if r is None or r["age_ms"] > (elapsed_seconds + REFUSAL_CLOCK_SLACK_SECONDS) * 1000:
            return error
        if listener == "socks5":
            return SocksReplyError(r["socks_reply"], r["reason"], r["detail"])
        return ProxyRefusedError(r["http_status"], ProxyStatus(EXITPOOL_PROXY_NAME, r["proxy_status_error"], r["detail"]), r["reason"], "service")

    def attempt(self, url: str, send: Callable[[], R], listener: str = "http", transport_errors: Tuple[Type[BaseException], ...] = ()) -> R:
        """The loop every synchronous client shares: ``send()`` makes the request and returns the
        client's response; a block is reported, the session moved and ``send()`` called again,
        ``attempts`` times in all. A failure of one of ``transport_errors`` (the library's
        connection errors) is checked against the service's record of refusals."""
        for attempt in range(1, self.attempts + 1):
            generation = self._generation
            started = monotonic()
            try:
                response = send()
            except transport_errors as error:
                typed = self.refusal_behind(error, monotonic() - started, listener)
                if typed is error:
                    raise
                raise typed from error
            leaving = self.exit
            block = self.judge_response(response, url)
            if block is None:
                return response
            again = attempt < self.attempts
            self.after_block(block, generation, again, response, leaving)
            if not again:
                raise StillBlockedError(block, attempt, response)
        raise AssertionError("unreachable: the last try returns or raises")

    # ---- clients ----

    def requests_session(self, scheme: str = "http") -> "requests.Session":
        """A ``requests.Session`` through the pool (``scheme`` "http" or "socks5h") that reports
        blocks, moves the session and retries."""
        from .requests_client import requests_session

        return requests_session(self, scheme)

    def httpx_client(self, scheme: str = "http", **kwargs: Any) -> "httpx.Client":
        """An ``httpx.Client`` through the pool (``scheme`` "http" or "socks5"; SOCKS5 needs
        socksio) that reports blocks, moves the session and retries."""
        from .httpx_client import httpx_client

        return httpx_client(self, scheme, **kwargs)

    def httpx_async_client(self, scheme: str = "http", **kwargs: Any) -> "httpx.AsyncClient":
        """The same as ``httpx_client`` for asyncio (the pool's API is called in a thread)."""
        from .httpx_client import httpx_async_client

        return httpx_async_client(self, scheme, **kwargs)
