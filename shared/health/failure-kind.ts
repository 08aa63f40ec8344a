import { ExitpoolError } from '../errors/catalogue.js';

/**
 * Failure kinds and the reading of a client's failure report (POST /api/sessions/{key}/failure).
 * Every field is optional and no text is refused: unknown words count as
 * `other`. Only a field of the wrong JSON type is bad input (400), signalled by a typed error.
 */

export const FAILURE_KINDS = ['captcha', 'blocked', 'transport', 'other', 'rate_limited'] as const;
export type FailureKind = (typeof FAILURE_KINDS)[number];

/** `transport` = seen by the pool on a proxied connection; `client` = reported through the API. */
export const FAILURE_SOURCES = ['transport', 'client'] as const;
export type FailureSource = (typeof FAILURE_SOURCES)[number];

/** The audit log keeps the reason; a client must not be able to flood it or forge log lines. */
export const MAX_FAILURE_REASON_LENGTH = 256;

export interface FailureReport {
  kind: FailureKind;
  /** Sanitised free text for the audit log; empty when none was given. */
  reason: string;
  /**
   * The site that complained (a host name, lower case, no trailing dot); empty when not given.
   * A burnt exit whose complaints all name one site is banned for that site only.
   */
  domain: string;
}

/** RFC 1035 limits: what a DNS name can be; longer or other text is refused (400). */
const MAX_DOMAIN_LENGTH = 253;
const DOMAIN_LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;

/** A report's `domain`: a host name or IPv4 address, normalised; undefined when it is neither. */
export function normaliseDomain(text: string): string | undefined {
  const d = text.trim().toLowerCase().replace(/\.$/, '');
  if (d === '' || d.length > MAX_DOMAIN_LENGTH) return undefined;
  return d.split('.').every((label) => DOMAIN_LABEL.test(label)) ? d : undefined;
}

/** A report body, or one of its fields, has the wrong JSON type: answered with 400. */
export class FailureReportInvalidError extends ExitpoolError {
  constructor(
    readonly field: 'body' | 'kind' | 'reason' | 'domain',
    readonly expected: string,
  ) {
    super('EXITPOOL_INVALID_REQUEST', field === 'body' ? `failure report must be a JSON object, got ${expected}` : `failure report field "${field}" must be ${expected}`);
  }
}

/**
 * Aliases by normalised text (lower case, runs of blanks, `-` and `_` folded into one `_`).
 * Words are matched whole, never searched for inside longer text: "no captcha, just slow" is
 * not a captcha, and unrecognised text is `other` never an error.
 */
const ALIASES: ReadonlyMap<string, FailureKind> = new Map<string, FailureKind>([
  ...['captcha', 'challenge', 'recaptcha', 'hcaptcha', 'turnstile', 'js_challenge', 'captcha_page'].map((a) => [a, 'captcha'] as const),
  ...['blocked', 'block', 'forbidden', 'denied', 'access_denied', 'banned', 'reputation', 'unavailable_for_legal_reasons', 'unauthorized'].map(
    (a) => [a, 'blocked'] as const,
  ),
  ...['transport', 'timeout', 'timed_out', 'reset', 'connection_reset', 'econnreset', 'refused', 'connection_refused', 'econnrefused', 'etimedout', 'eof', 'closed'].map(
    (a) => [a, 'transport'] as const,
  ),
  ...['rate_limited', 'rate_limit', 'ratelimit', 'ratelimited', 'too_many_requests', 'throttled'].map((a) => [a, 'rate_limited'] as const),
  ['other', 'other'],
]);

/**
 * HTTP status codes, bare ("403") or prefixed ("http_403", "HTTP 403", "status 403").
 * 401, 403 and 451 mean the destination refuses this exit. 429 is a rate limit. Everything
 * else (5xx included) is `other`: a destination's own server error cannot be pinned on the exit,
 * and a 5xx reputation page from a CDN is better reported explicitly as blocked or captcha.
 */
const STATUS = /^(?:(?:http|status|code)_?)?([1-5]\d\d)$/;
const STATUS_KINDS: Readonly<Record<string, FailureKind>> = { '401': 'blocked', '403': 'blocked', '451': 'blocked', '429': 'rate_limited' };

const MAX_ALIAS_TEXT_LENGTH = 64;

function normalise(text: string): string {
  return text.trim().toLowerCase().replace(/[\s_-]+/g, '_');
}

/** Reads free text as a kind: a kind name, an alias or a status code; anything else is `other`. */
export function kindFromText(text: string): FailureKind {
  // Longer than any alias: skip the work on hostile input.
  if (text.length > MAX_ALIAS_TEXT_LENGTH) return 'other';
  const key = normalise(text);
  const alias = ALIASES.get(key);
  if (alias) return alias;
  const status = STATUS.exec(key);
  if (status) return STATUS_KINDS[status[1] as string] ?? 'other';
  return 'other';
}

// C0 and C1 controls, DEL, line/paragraph separators and bidi overrides: each could forge or
// reorder a line of a text log or the dashboard's event list.
 
const UNSAFE_CHARACTERS = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/** Control characters removed, trimmed, at most MAX_FAILURE_REASON_LENGTH code points. */
export function sanitiseReason(text: string): string {
  const clean = text.replace(UNSAFE_CHARACTERS, ' ').trim();
  const points = Array.from(clean);
  return points.length <= MAX_FAILURE_REASON_LENGTH ? clean : points.slice(0, MAX_FAILURE_REASON_LENGTH).join('').trimEnd();
}

function describeType(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return `a ${typeof value}`;
}

function optionalString(body: Record<string, unknown>, field: 'kind' | 'reason' | 'domain'): string | undefined {
  const value = body[field];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw new FailureReportInvalidError(field, `a string, got ${describeType(value)}`);
  return value;
}

/**
 * Types a failure report. A missing body (undefined, null, or an empty object as a JSON body
 * parser leaves it) is `other`. A `kind` given as text is read like reason text, so an alias
 * ("403") or an unknown word ("other") never fails; when `kind` is absent or blank the report is
 * typed from `reason`. Throws FailureReportInvalidError only for a wrong JSON type.
 */
export function readFailureReport(body: unknown): FailureReport {
  if (body === undefined || body === null) return { kind: 'other', reason: '', domain: '' };
  if (typeof body !== 'object' || Array.isArray(body)) throw new FailureReportInvalidError('body', describeType(body));
  const fields = body as Record<string, unknown>;
  const kindText = optionalString(fields, 'kind');
  const reasonText = optionalString(fields, 'reason');
  const domainText = optionalString(fields, 'domain');
  const reason = reasonText === undefined ? '' : sanitiseReason(reasonText);
  let domain = '';
  if (domainText !== undefined && domainText.trim() !== '') {
    const d = normaliseDomain(domainText);
    if (d === undefined) throw new FailureReportInvalidError('domain', `a host name (at most ${MAX_DOMAIN_LENGTH} characters of letters, digits, hyphens and dots)`);
    domain = d;
  }
  if (kindText !== undefined && kindText.trim() !== '') return { kind: kindFromText(kindText), reason, domain };
  return { kind: reason === '' ? 'other' : kindFromText(reason), reason, domain };
}

/** How one failure is to be taken, beyond its kind and source. */
export interface FailureOptions {
  /** When the failure happened, when earlier than now (a connection's end). */
  occurredAt?: number;
  /** false: weigh it, but do not let it quarantine (the pool's routable floor, MIN_ROUTABLE). */
  mayQuarantine?: boolean;
  /** A client's complaint about this site (reached through the instance's exit): a ban for the site settles it, and it alone. */
  site?: string;
}
