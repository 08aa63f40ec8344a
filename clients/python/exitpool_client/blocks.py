"""Is a response a block? What the proxy cannot see inside TLS, the client judges from the
response it got. The default ban policy reads challenge pages, not words: a vendor's
interstitial (challenges.py), a status code with its headers (403, 429 with its ``Retry-After``,
any status with ``cf-mitigated: challenge``), a redirect to a vendor's challenge URL. A 200 page
is a block only by a signature, or by body markers the caller opts into. Each block names the
failure kind exitpool's ``POST /api/sessions/{key}/failure`` takes."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from email.utils import parsedate_to_datetime
from time import time
from typing import Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple
from urllib.parse import urljoin

from .challenges import CHALLENGE_SIGNATURES, CHALLENGE_URLS, ChallengeEvidence, ChallengeSignature, ChallengeUrl

#: The kinds a failure report takes.
FAILURE_KINDS = ("captcha", "blocked", "rate_limited", "transport", "other")


@dataclass(frozen=True)
class Block:
    #: The kind exitpool's failure report takes: captcha, blocked, rate_limited, transport, other.
    kind: str
    reason: str
    #: The anti-bot vendor whose challenge it was, when a signature or challenge URL recognised it.
    vendor: Optional[str] = None
    #: What ``Retry-After`` asked for, in seconds.
    retry_after_seconds: Optional[int] = None
    #: The URL of the site that showed the block: where the response came from, or, for a
    #: redirect to a vendor's challenge host, the last URL before it (the report names its domain).
    site: Optional[str] = None


def _default_statuses() -> Dict[int, str]:
    return {403: "blocked", 429: "rate_limited"}


@dataclass(frozen=True)
class BlockRules:
    #: Status code -> kind, after no challenge signature matched.
    statuses: Dict[int, str] = field(default_factory=_default_statuses)
    #: The vendors' interstitials, tried first on every response.
    challenges: Sequence[ChallengeSignature] = CHALLENGE_SIGNATURES
    #: URLs that are a challenge wherever a redirect leads, followed or not.
    challenge_urls: Sequence[ChallengeUrl] = CHALLENGE_URLS
    #: Opt-in: a 200 text body matching the pattern is that kind (none by default: words are not blocks).
    body_markers: Sequence[Tuple["re.Pattern[str]", str]] = ()


DEFAULT_BLOCK_RULES = BlockRules()


@dataclass(frozen=True)
class ResponseFacts:
    """Everything a ban policy reads of one response."""

    status: int
    #: Any mapping with ``get``; names are looked up in lower case (requests', httpx's and the
    #: clients' own header objects are case-insensitive).
    headers: Mapping[str, str]
    #: The body as text ('' when it was not read).
    body: str
    #: The URL asked for.
    url: str = ""
    #: Where followed redirects led, the final URL last.
    redirected_to: Sequence[str] = ()


#: A ban policy: whether a response is a block, and what kind. Pass your own to ExitpoolSession
#: (``ban_policy``) to add to or replace the default, as scrapy-rotating-proxies' ``response_is_ban`` does.
BanPolicy = Callable[[ResponseFacts], Optional[Block]]


class _LowerHeaders(Mapping[str, str]):
    """Case-insensitive reads of any header mapping."""

    def __init__(self, headers: Mapping[str, str]) -> None:
        self._headers = headers

    def __getitem__(self, name: str) -> str:
        value = self._headers.get(name)
        if value is not None:
            return value
        # A plain dict: its names in any case.
        wanted = name.lower()
        for key in self._headers:
            if isinstance(key, str) and key.lower() == wanted:
                return self._headers[key]
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._headers)

    def __len__(self) -> int:
        return len(self._headers)


def retry_after_seconds(value: Optional[str], now: Optional[float] = None) -> Optional[int]:
    """``Retry-After`` in seconds: delta-seconds or an HTTP date; None when absent or unreadable."""
    if value is None or not value.strip():
        return None
    v = value.strip()
    if re.fullmatch(r"\d{1,9}", v):
        return int(v)
    if not v.upper().endswith("GMT"):
        return None
    try:
        at = parsedate_to_datetime(v).timestamp()
    except (TypeError, ValueError):
        return None
    return max(0, round(at - (time() if now is None else now)))


def _challenge_url(rules: BlockRules, url: str) -> Optional[ChallengeUrl]:
    return next((c for c in rules.challenge_urls if c.pattern.search(url)), None)


def detect_block(
    status: int,
    headers: Mapping[str, str],
    text: str,
    rules: BlockRules = DEFAULT_BLOCK_RULES,
    redirected_to: Iterable[str] = (),
    url: str = "",
) -> Optional[Block]:
    """The block a response shows, or None. ``headers`` is any mapping (looked up case-blind);
    ``redirected_to`` the URLs that redirects the client followed led to (a client that follows
    them never shows the rules the 3xx itself); ``url`` the URL asked for."""
    h = _LowerHeaders(headers)
    chain: List[str] = ([url] if url else []) + [str(u) for u in redirected_to]
    final = chain[-1] if chain else None
    retry = retry_after_seconds(h.get("retry-after"))

    def with_retry(b: Block) -> Block:
        return b if retry is None else replace(b, retry_after_seconds=retry, reason=f"{b.reason} (Retry-After {retry} s)")

    # A followed redirect that went through a vendor's challenge URL: the site is the one before it.
    for i in range(1, len(chain)):
        c = _challenge_url(rules, chain[i])
        if c is not None:
            return Block("captcha", f"redirected to {c.vendor}'s challenge ({chain[i][:120]})", c.vendor, site=chain[i - 1])
    evidence = ChallengeEvidence(status, h, text or "")
    for signature in rules.challenges:
        m = signature(evidence)
        if m is not None:
            what = "challenge" if m.kind == "captcha" else "block"
            return with_retry(Block(m.kind, f"{m.vendor} {what} page (HTTP {status})", m.vendor, site=final))
    if 300 <= status < 400:
        location = h.get("location")
        c = None if location is None else _challenge_url(rules, urljoin(final or "", location))
        if c is not None and location is not None:
            return Block("captcha", f"redirect to {c.vendor}'s challenge ({location[:120]})", c.vendor, site=final)
    kind = rules.statuses.get(status)
    if kind is not None:
        return with_retry(Block(kind, f"HTTP {status}", site=final))
    if status == 200:
        for pattern, marker_kind in rules.body_markers:
            if pattern.search(text or ""):
                return Block(marker_kind, f"body matches {pattern.pattern[:60]}", site=final)
    return None


def ban_policy_of(rules: BlockRules) -> BanPolicy:
    """The ban policy that ``rules`` make."""

    def policy(r: ResponseFacts) -> Optional[Block]:
        return detect_block(r.status, r.headers, r.body, rules, r.redirected_to, r.url)

    return policy


#: The default ban policy (DEFAULT_BLOCK_RULES).
default_ban_policy: BanPolicy = ban_policy_of(DEFAULT_BLOCK_RULES)
