/**
 * What each anti-bot vendor's challenge or block page looks like, as opposed to the pages it
 * protects. Every signature is something only the interstitial carries: the vendor's script and
 * cookies are on every protected page too, so they never count (clients/test-pages holds an
 * ordinary protected page for each vendor, and the tests require zero false positives on them).
 * clients/python/exitpool_client/challenges.py is the same table in Python.
 */
import type { FailureKind } from './failure-kind.js';

/** What a signature reads of one response. */
export interface ChallengeEvidence {
  status: number;
  headers: { get(name: string): string | null };
  /** The body as text ('' when it was not read). */
  body: string;
}

/** A recognised interstitial: what it is, and whose. */
export interface ChallengeMatch {
  kind: FailureKind;
  vendor: string;
}

/** One vendor's interstitial, or null when the response is not it. */
export type ChallengeSignature = (response: ChallengeEvidence) => ChallengeMatch | null;

const found = (vendor: string, kind: FailureKind): ChallengeMatch => ({ kind, vendor });

/** The header's comma-separated tokens, lower-case. */
function tokens(value: string | null): string[] {
  return (value ?? '').split(',').map((t) => t.trim().toLowerCase());
}

/** Cloudflare: its `cf-mitigated` header, the challenge page's options object, a firewall block's error details. */
export const cloudflare: ChallengeSignature = ({ status, headers, body }) => {
  if (tokens(headers.get('cf-mitigated')).includes('challenge')) return found('cloudflare', 'captcha');
  // Managed, JS and interactive challenges carry window._cf_chl_opt; the older "I'm Under Attack" page its jschl form.
  // (In a script: an article quoting the page is no challenge.)
  if (/<script\b[^>]*>[^<]*window\._cf_chl_opt\s*=|__cf_chl_jschl_tk__|name="jschl_vc"/.test(body)) return found('cloudflare', 'captcha');
  // Error 1020 and its kin name their error-details block.
  if (status >= 400 && /id="cf-error-details"/.test(body)) return found('cloudflare', 'blocked');
  return null;
};

/** DataDome: the interstitial's `dd` object naming its captcha host (`'rt':'b'` is a block), or an XHR's captcha URL as JSON. */
export const datadome: ChallengeSignature = ({ body }) => {
  const dd = /var dd\s*=\s*\{([^}]*)\}/.exec(body)?.[1];
  if (dd !== undefined && /captcha-delivery\.com/.test(dd)) return found('datadome', /'rt'\s*:\s*'b'/.test(dd) ? 'blocked' : 'captcha');
  if (/^\s*\{\s*"url"\s*:\s*"https:\/\/geo\.captcha-delivery\.com\/captcha\//.test(body)) return found('datadome', 'captcha');
  return null;
};

/** PerimeterX (HUMAN): the press-and-hold element, or an XHR's block as JSON; the sensor script alone is on every protected page. */
export const perimeterx: ChallengeSignature = ({ body }) => {
  if (/<div\b[^>]*\bid\s*=\s*["']px-captcha["']/i.test(body)) return found('perimeterx', 'captcha');
  if (/"appId"\s*:\s*"PX[^"]*"/.test(body) && /"blockScript"\s*:/.test(body)) return found('perimeterx', 'captcha');
  return null;
};

/** Akamai: the Bot Manager interstitial (not its /akam/ sensor), or the edge's Access Denied with its errors.edgesuite.net reference. */
export const akamai: ChallengeSignature = ({ status, body }) => {
  if (/\/_sec\/cp_challenge\/|id="sec-if-cpt-container"/.test(body)) return found('akamai', 'captcha');
  if (status >= 400 && /errors(?:\.|&#46;)edgesuite(?:\.|&#46;)net/.test(body)) return found('akamai', 'blocked');
  return null;
};

/** Imperva (Incapsula): the challenge iframe's resource (the protected page's own script is `?SWJIYLWA=`), or an incident page. */
export const imperva: ChallengeSignature = ({ body }) => {
  if (/_Incapsula_Resource\?(?:CWUDNSAI|SWUDNSAI)=/.test(body)) return found('imperva', 'captcha');
  if (/Incapsula incident ID/.test(body)) return found('imperva', 'blocked');
  return null;
};

/** Google's unusual-traffic page: its captcha form with the reCAPTCHA widget. */
export const googleUnusualTraffic: ChallengeSignature = ({ body }) =>
  /<form\b[^>]*\bid\s*=\s*["']captcha-form["']/i.test(body) && /\bg-recaptcha\b/.test(body) ? found('recaptcha', 'captcha') : null;

/** A captcha widget element (not a script, not escaped markup): reCAPTCHA, hCaptcha, Turnstile. */
const WIDGET = /<(?:div|span|button|section)\b[^>]*\bclass\s*=\s*["'][^"']*\b(g-recaptcha|h-captcha|cf-turnstile)\b/i;
const WIDGET_VENDOR: Record<string, string> = { 'g-recaptcha': 'recaptcha', 'h-captcha': 'hcaptcha', 'cf-turnstile': 'turnstile' };
const INPUT_TAG = /<input\b[^>]*>/gi;
const INPUT_TYPE = /\btype\s*=\s*["']?([a-z-]+)/i;
/** Input types nobody types into; a form with any other input is a form with a widget, not a challenge. */
const NOT_FILLED = new Set(['hidden', 'submit', 'button', 'image', 'reset', 'checkbox', 'radio']);
/** A textarea or select the visitor fills (the widgets' own response fields excepted). */
const FILLED_CONTROL = /<(?:textarea|select)\b(?![^>]*\bname\s*=\s*["']?(?:g-recaptcha-response|h-captcha-response|cf-turnstile-response))/i;

/** Whether the page has a field a visitor fills in: a sign-in, a search, a comment form. */
export function hasFillableField(body: string): boolean {
  if (FILLED_CONTROL.test(body)) return true;
  for (const tag of body.match(INPUT_TAG) ?? []) {
    const type = (INPUT_TYPE.exec(tag)?.[1] ?? 'text').toLowerCase();
    if (!NOT_FILLED.has(type)) return true;
  }
  return false;
}

/**
 * A page whose point is a captcha widget: the widget, and nothing for a visitor to fill in. A
 * sign-in, sign-up or contact form with a widget is an ordinary page.
 */
export const captchaWidgetPage: ChallengeSignature = ({ body }) => {
  const widget = WIDGET.exec(body)?.[1]?.toLowerCase();
  if (widget === undefined || hasFillableField(body)) return null;
  return found(WIDGET_VENDOR[widget] ?? widget, 'captcha');
};

/** Every vendor's signature, in the order they are tried. */
export const CHALLENGE_SIGNATURES: readonly ChallengeSignature[] = [cloudflare, datadome, perimeterx, akamai, imperva, googleUnusualTraffic, captchaWidgetPage];

/** A URL that is a vendor's challenge, wherever a redirect leads. */
export interface ChallengeUrl {
  vendor: string;
  pattern: RegExp;
}

/**
 * DataDome's captcha host, Google's unusual-traffic page, the challenge paths of Cloudflare,
 * Imperva, PerimeterX and Akamai. Words in a site's own paths (`/coding-challenge-2026`) are not.
 */
export const CHALLENGE_URLS: readonly ChallengeUrl[] = [
  { vendor: 'datadome', pattern: /^https?:\/\/(?:geo|ct)\.captcha-delivery\.com\//i },
  { vendor: 'recaptcha', pattern: /^https?:\/\/(?:www\.)?google\.[a-z.]+\/sorry\/index/i },
  { vendor: 'cloudflare', pattern: /\/cdn-cgi\/challenge-platform\/|[?&]__cf_chl_(?:rt_)?tk=/i },
  { vendor: 'imperva', pattern: /\/_Incapsula_Resource\?(?:CWUDNSAI|SWUDNSAI)=/i },
  { vendor: 'perimeterx', pattern: /\/px\/captcha\/|[?&]_pxCaptcha=/i },
  { vendor: 'akamai', pattern: /\/_sec\/cp_challenge\//i },
];
