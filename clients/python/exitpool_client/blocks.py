"""Is a response a block? Status codes, body markers and redirects to challenge pages."""

import re
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Mapping, Optional, Pattern, Tuple


@dataclass(frozen=True)
class Block:
    #: The kind exitpool's failure report takes: captcha, blocked, rate_limited, transport, other.
    kind: str
    reason: str


@dataclass(frozen=True)
class BlockRules:
    statuses: Dict[int, str] = field(default_factory=lambda: {403: "blocked", 429: "rate_limited"})
    body_markers: List[Tuple[Pattern, str]] = field(
        default_factory=lambda: [
            (re.compile(r"captcha|are you a (ro)?bot|verify you are human|cf-chl-", re.I), "captcha"),
            (re.compile(r"access denied|you have been blocked", re.I), "blocked"),
        ]
    )
    challenge_redirects: List[Pattern] = field(default_factory=lambda: [re.compile(r"captcha|challenge|/sorry/", re.I)])


DEFAULT_BLOCK_RULES = BlockRules()


def detect_block(status: int, headers: Mapping[str, str], text: str, rules: BlockRules = DEFAULT_BLOCK_RULES, redirected_to: Iterable[str] = ()) -> Optional[Block]:
    """The block a response shows, or None. ``headers`` is any case-insensitive mapping;
    ``redirected_to`` the URLs that redirects the client followed led to (a client that follows
    them never shows the rules the 3xx itself)."""
    kind = rules.statuses.get(status)
    if kind:
        return Block(kind, f"HTTP {status}")
    if 300 <= status < 400:
        location = headers.get("location", "") or ""
        if any(p.search(location) for p in rules.challenge_redirects):
            return Block("captcha", f"redirect to a challenge ({location[:120]})")
    for url in redirected_to:
        if any(p.search(url) for p in rules.challenge_redirects):
            return Block("captcha", f"redirected to a challenge ({url[:120]})")
    for pattern, kind in rules.body_markers:
        if pattern.search(text or ""):
            return Block(kind, f"body matches {pattern.pattern[:60]}")
    return None
