"""What each anti-bot vendor's challenge or block page looks like, as opposed to the pages it
protects. Every signature is something only the interstitial carries: the vendor's script and
cookies are on every protected page too, so they never count (clients/test-pages holds an
ordinary protected page for each vendor, and the tests require zero false positives on them).
clients/node/src/challenge-signatures.ts is the same table in TypeScript."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Mapping, Optional, Sequence


@dataclass(frozen=True)
class ChallengeEvidence:
    """What a signature reads of one response."""

    status: int
    #: Case-insensitive, or lower-case names.
    headers: Mapping[str, str]
    #: The body as text ('' when it was not read).
    body: str


@dataclass(frozen=True)
class ChallengeMatch:
    """A recognised interstitial: what it is (a failure kind), and whose."""

    kind: str
    vendor: str


#: One vendor's interstitial, or None when the response is not it.
ChallengeSignature = Callable[[ChallengeEvidence], Optional[ChallengeMatch]]


def _header(headers: Mapping[str, str], name: str) -> str:
    return headers.get(name) or headers.get(name.title()) or ""


def cloudflare(r: ChallengeEvidence) -> Optional[ChallengeMatch]:
    """Cloudflare: its ``cf-mitigated`` header, the challenge page's options object, a firewall
    block's error details."""
    if "challenge" in [t.strip().lower() for t in _header(r.headers, "cf-mitigated").split(",")]:
        return ChallengeMatch("captcha", "cloudflare")
    # In a script: an article quoting the page is no challenge. Or the older "I'm Under Attack" form.
    if re.search(r"<script\b[^>]*>[^<]*window\._cf_chl_opt\s*=|__cf_chl_jschl_tk__|name=\"jschl_vc\"", r.body):
        return ChallengeMatch("captcha", "cloudflare")
    if r.status >= 400 and 'id="cf-error-details"' in r.body:
        return ChallengeMatch("blocked", "cloudflare")
    return None


def datadome(r: ChallengeEvidence) -> Optional[ChallengeMatch]:
    """DataDome: the interstitial's ``dd`` object naming its captcha host (``'rt':'b'`` is a
    block), or an XHR's captcha URL as JSON."""
    dd = re.search(r"var dd\s*=\s*\{([^}]*)\}", r.body)
    if dd and "captcha-delivery.com" in dd.group(1):
        return ChallengeMatch("blocked" if re.search(r"'rt'\s*:\s*'b'", dd.group(1)) else "captcha", "datadome")
    if re.match(r'\s*\{\s*"url"\s*:\s*"https://geo\.captcha-delivery\.com/captcha/', r.body):
        return ChallengeMatch("captcha", "datadome")
    return None


def perimeterx(r: ChallengeEvidence) -> Optional[ChallengeMatch]:
    """PerimeterX (HUMAN): the press-and-hold element, or an XHR's block as JSON; the sensor
    script alone is on every protected page."""
    if re.search(r"<div\b[^>]*\bid\s*=\s*[\"']px-captcha[\"']", r.body, re.I):
        return ChallengeMatch("captcha", "perimeterx")
    if re.search(r'"appId"\s*:\s*"PX[^"]*"', r.body) and re.search(r'"blockScript"\s*:', r.body):
        return ChallengeMatch("captcha", "perimeterx")
    return None


def akamai(r: ChallengeEvidence) -> Optional[ChallengeMatch]:
    """Akamai: the Bot Manager interstitial (not its /akam/ sensor), or the edge's Access Denied
    with its errors.edgesuite.net reference."""
    if re.search(r"/_sec/cp_challenge/|id=\"sec-if-cpt-container\"", r.body):
        return ChallengeMatch("captcha", "akamai")
    if r.status >= 400 and re.search(r"errors(?:\.|&#46;)edgesuite(?:\.|&#46;)net", r.body):
        return ChallengeMatch("blocked", "akamai")
    return None


def imperva(r: ChallengeEvidence) -> Optional[ChallengeMatch]:
    """Imperva (Incapsula): the challenge iframe's resource (the protected page's own script is
    ``?SWJIYLWA=``), or an incident page."""
    if re.search(r"_Incapsula_Resource\?(?:CWUDNSAI|SWUDNSAI)=", r.body):
        return ChallengeMatch("captcha", "imperva")
    if "Incapsula incident ID" in r.body:
        return ChallengeMatch("blocked", "imperva")
    return None


def google_unusual_traffic(r: ChallengeEvidence) -> Optional[ChallengeMatch]:
    """Google's unusual-traffic page: its captcha form with the reCAPTCHA widget."""
    if re.search(r"<form\b[^>]*\bid\s*=\s*[\"']captcha-form[\"']", r.body, re.I) and re.search(r"\bg-recaptcha\b", r.body):
        return ChallengeMatch("captcha", "recaptcha")
    return None


#: A captcha widget element (not a script, not escaped markup): reCAPTCHA, hCaptcha, Turnstile.
_WIDGET = re.compile(r"<(?:div|span|button|section)\b[^>]*\bclass\s*=\s*[\"'][^\"']*\b(g-recaptcha|h-captcha|cf-turnstile)\b", re.I)
_WIDGET_VENDOR = {"g-recaptcha": "recaptcha", "h-captcha": "hcaptcha", "cf-turnstile": "turnstile"}
_INPUT_TAG = re.compile(r"<input\b[^>]*>", re.I)
_INPUT_TYPE = re.compile(r"\btype\s*=\s*[\"']?([a-z-]+)", re.I)
#: Input types nobody types into; a form with any other input is a form with a widget, not a challenge.
_NOT_FILLED = frozenset({"hidden", "submit", "button", "image", "reset", "checkbox", "radio"})
#: A textarea or select the visitor fills (the widgets' own response fields excepted).
_FILLED_CONTROL = re.compile(r"<(?:textarea|select)\b(?![^>]*\bname\s*=\s*[\"']?(?:g-recaptcha-response|h-captcha-response|cf-turnstile-response))", re.I)


def has_fillable_field(body: str) -> bool:
    """Whether the page has a field a visitor fills in: a sign-in, a search, a comment form."""
    if _FILLED_CONTROL.search(body):
        return True
    for tag in _INPUT_TAG.findall(body):
        m = _INPUT_TYPE.search(tag)
        if (m.group(1).lower() if m else "text") not in _NOT_FILLED:
            return True
    return False


def captcha_widget_page(r: ChallengeEvidence) -> Optional[ChallengeMatch]:
    """A page whose point is a captcha widget: the widget, and nothing for a visitor to fill in.
    A sign-in, sign-up or contact form with a widget is an ordinary page."""
    m = _WIDGET.search(r.body)
    if m is None or has_fillable_field(r.body):
        return None
    widget = m.group(1).lower()
    return ChallengeMatch("captcha", _WIDGET_VENDOR.get(widget, widget))


#: Every vendor's signature, in the order they are tried.
CHALLENGE_SIGNATURES: Sequence[ChallengeSignature] = (cloudflare, datadome, perimeterx, akamai, imperva, google_unusual_traffic, captcha_widget_page)


@dataclass(frozen=True)
class ChallengeUrl:
    """A URL that is a vendor's challenge, wherever a redirect leads."""

    vendor: str
    pattern: "re.Pattern[str]"


#: DataDome's captcha host, Google's unusual-traffic page, the challenge paths of Cloudflare,
#: Imperva, PerimeterX and Akamai. Words in a site's own paths (``/coding-challenge-2026``) are not.
CHALLENGE_URLS: Sequence[ChallengeUrl] = (
    ChallengeUrl("datadome", re.compile(r"^https?://(?:geo|ct)\.captcha-delivery\.com/", re.I)),
    ChallengeUrl("recaptcha", re.compile(r"^https?://(?:www\.)?google\.[a-z.]+/sorry/index", re.I)),
    ChallengeUrl("cloudflare", re.compile(r"/cdn-cgi/challenge-platform/|[?&]__cf_chl_(?:rt_)?tk=", re.I)),
    ChallengeUrl("imperva", re.compile(r"/_Incapsula_Resource\?(?:CWUDNSAI|SWUDNSAI)=", re.I)),
    ChallengeUrl("perimeterx", re.compile(r"/px/captcha/|[?&]_pxCaptcha=", re.I)),
    ChallengeUrl("akamai", re.compile(r"/_sec/cp_challenge/", re.I)),
)
