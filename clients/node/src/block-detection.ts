/**
 * Is a response a block? What the proxy cannot see inside TLS, the client judges from the
 * response it got. The default ban policy reads challenge pages, not words: a vendor's
 * interstitial (challenge-signatures.ts), a status code with its headers (403, 429 with its
 * `Retry-After`, any status with `cf-mitigated: challenge`), a redirect to a vendor's challenge
 * URL. A 200 page is a block only by a signature, or by body markers the caller opts into. Each
 * block names the failure kind exitpool's `POST /api/sessions/{key}/failure` takes.
 */
import { CHALLENGE_SIGNATURES, CHALLENGE_URLS, type ChallengeSignature, type ChallengeUrl } from './challenge-signatures.js';
import type { FailureKind } from './failure-kind.js';

export type { FailureKind } from './failure-kind.js';

export interface BlockRules {
  /** Status code → kind, after no challenge signature matched. Default: 403 blocked, 429 rate_limited. */
  statuses: ReadonlyMap<number, FailureKind>;
  /** The vendors' interstitials, tried first on every response (CHALLENGE_SIGNATURES). */
  challenges: readonly ChallengeSignature[];
  /** URLs that are a challenge wherever a redirect leads, followed or not (CHALLENGE_URLS). */
  challengeUrls: readonly ChallengeUrl[];
  /** Opt-in: a 200 text body matching the pattern is that kind (none by default: words are not blocks). */
  bodyMarkers: readonly { pattern: RegExp; kind: FailureKind }[];
}

export const DEFAULT_BLOCK_RULES: BlockRules = {
  statuses: new Map<number, FailureKind>([
    [403, 'blocked'],
    [429, 'rate_limited'],
  ]),
  challenges: CHALLENGE_SIGNATURES,
  challengeUrls: CHALLENGE_URLS,
  bodyMarkers: [],
};

export interface Block {
  kind: FailureKind;
  reason: string;
  /** The anti-bot vendor whose challenge it was, when a signature or challenge URL recognised it. */
  vendor?: string;
  /** What `Retry-After` asked for, in seconds (a 429 or 503 that sent one). */
  retryAfterSeconds?: number;
  /**
   * The URL of the site that showed the block: where the response came from, or, for a redirect
   * to a vendor's challenge host, the last URL before it (the report names that site's domain).
   */
  site?: string;
}

/** What the rules read of a response besides its body. */
export interface JudgedHead {
  status: number;
  headers: { get(name: string): string | null };
  /** The URL asked for. */
  url?: string;
  /**
   * The URLs that redirects the client followed led to, the final one last ([] or absent when
   * none was followed): a client that follows redirects never shows the rules the 3xx itself.
   */
  redirectedTo?: readonly string[];
}

/** Everything a ban policy reads of one response. */
export interface ResponseFacts extends JudgedHead {
  /** The body as text ('' when it was not read: a download, an image). */
  body: string;
}

/**
 * A ban policy: whether a response is a block, and what kind. The clients call it on every
 * response; pass your own (`banPolicy` in ExitpoolSession's options) to add to or replace the
 * default, as scrapy-rotating-proxies' `response_is_ban` does.
 */
export type BanPolicy = (response: ResponseFacts) => Block | null;

/** `Retry-After` in seconds: delta-seconds or an HTTP date; undefined when absent or unreadable. */
export function retryAfterSeconds(value: string | null, now = Date.now()): number | undefined {
  if (value === null || value.trim() === '') return undefined;
  const v = value.trim();
  if (/^\d{1,9}$/.test(v)) return Number(v);
  // An HTTP date (IMF-fixdate and the obsolete forms all end in GMT).
  if (!/GMT$/i.test(v)) return undefined;
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, Math.round((at - now) / 1000));
}

function challengeUrl(rules: BlockRules, url: string): ChallengeUrl | undefined {
  return rules.challengeUrls.find((c) => c.pattern.test(url));
}

function resolved(location: string, base: string | undefined): string {
  try {
    return new URL(location, base).href;
  } catch {
    return location;
  }
}

/** The block a response shows, or null. `body` is its text (or '' when not read). */
export function detectBlock(response: JudgedHead, body: string, rules: BlockRules = DEFAULT_BLOCK_RULES): Block | null {
  const chain = [...(response.url === undefined ? [] : [response.url]), ...(response.redirectedTo ?? [])];
  const final = chain.at(-1);
  const at = (b: Block, site: string | undefined): Block => (site === undefined ? b : { ...b, site });
  const retry = retryAfterSeconds(response.headers.get('retry-after'));
  const withRetry = (b: Block): Block => (retry === undefined ? b : { ...b, retryAfterSeconds: retry, reason: `${b.reason} (Retry-After ${retry} s)` });
  // A followed redirect that went through a vendor's challenge URL: the site is the one before it.
  for (let i = 1; i < chain.length; i++) {
    const c = challengeUrl(rules, chain[i] as string);
    if (c) return at({ kind: 'captcha', vendor: c.vendor, reason: `redirected to ${c.vendor}'s challenge (${(chain[i] as string).slice(0, 120)})` }, chain[i - 1]);
  }
  for (const signature of rules.challenges) {
    const m = signature({ status: response.status, headers: response.headers, body });
    if (m) return at(withRetry({ kind: m.kind, vendor: m.vendor, reason: `${m.vendor} ${m.kind === 'captcha' ? 'challenge' : 'block'} page (HTTP ${response.status})` }), final);
  }
  if (response.status >= 300 && response.status < 400) {
    const location = response.headers.get('location');
    const c = location === null ? undefined : challengeUrl(rules, resolved(location, final));
    if (c) return at({ kind: 'captcha', vendor: c.vendor, reason: `redirect to ${c.vendor}'s challenge (${(location as string).slice(0, 120)})` }, final);
  }
  const byStatus = rules.statuses.get(response.status);
  if (byStatus) return at(withRetry({ kind: byStatus, reason: `HTTP ${response.status}` }), final);
  if (response.status === 200) {
    for (const m of rules.bodyMarkers) if (m.pattern.test(body)) return at({ kind: m.kind, reason: `body matches ${m.pattern.source.slice(0, 60)}` }, final);
  }
  return null;
}

/** The ban policy that `rules` make. */
export function banPolicyOf(rules: BlockRules): BanPolicy {
  return (r) => detectBlock(r, r.body, rules);
}

/** The default ban policy (DEFAULT_BLOCK_RULES). */
export const defaultBanPolicy: BanPolicy = banPolicyOf(DEFAULT_BLOCK_RULES);
