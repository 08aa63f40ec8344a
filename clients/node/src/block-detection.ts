/**
 * Is a response a block? What the proxy cannot see inside TLS, the client judges from the
 * response it got: a status code, a marker in the body, a redirect to a challenge page. Each
 * rule names the failure kind exitpool's `POST /api/sessions/{key}/failure` takes.
 */

export type FailureKind = 'captcha' | 'blocked' | 'rate_limited' | 'transport' | 'other';

export interface BlockRules {
  /** Status code → kind. */
  statuses: ReadonlyMap<number, FailureKind>;
  /** A body matching the pattern is that kind (checked on text bodies only). */
  bodyMarkers: readonly { pattern: RegExp; kind: FailureKind }[];
  /** A redirect whose Location (or, once followed, whose target) matches is a challenge (captcha). */
  challengeRedirects: readonly RegExp[];
}

export const DEFAULT_BLOCK_RULES: BlockRules = {
  statuses: new Map<number, FailureKind>([
    [403, 'blocked'],
    [429, 'rate_limited'],
  ]),
  bodyMarkers: [
    { pattern: /captcha|are you a (ro)?bot|verify you are human|cf-chl-/i, kind: 'captcha' },
    { pattern: /access denied|you have been blocked/i, kind: 'blocked' },
  ],
  challengeRedirects: [/captcha|challenge|\/sorry\//i],
};

export interface Block {
  kind: FailureKind;
  reason: string;
}

/** What the rules read of a response besides its body. */
export interface JudgedHead {
  status: number;
  headers: { get(name: string): string | null };
  /**
   * The URLs that redirects the client followed led to, the final one last ([] or absent when
   * none was followed): a client that follows redirects never shows the rules the 3xx itself.
   */
  redirectedTo?: readonly string[];
}

/** The block a response shows, or null. `body` is its text (or '' when not read). */
export function detectBlock(response: JudgedHead, body: string, rules: BlockRules = DEFAULT_BLOCK_RULES): Block | null {
  const byStatus = rules.statuses.get(response.status);
  if (byStatus) return { kind: byStatus, reason: `HTTP ${response.status}` };
  if (response.status >= 300 && response.status < 400) {
    const location = response.headers.get('location') ?? '';
    if (rules.challengeRedirects.some((r) => r.test(location))) return { kind: 'captcha', reason: `redirect to a challenge (${location.slice(0, 120)})` };
  }
  for (const to of response.redirectedTo ?? []) {
    if (rules.challengeRedirects.some((r) => r.test(to))) return { kind: 'captcha', reason: `redirected to a challenge (${to.slice(0, 120)})` };
  }
  for (const m of rules.bodyMarkers) if (m.pattern.test(body)) return { kind: m.kind, reason: `body matches ${m.pattern.source.slice(0, 60)}` };
  return null;
}
