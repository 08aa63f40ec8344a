/**
 * The typed errors of the clients: the proxy's refusals (read from its answer, or asked of the
 * service when the HTTP or SOCKS5 library hid them), a block the retries did not get past, a
 * rotation that found no new exit, and an API call that failed.
 */
import type { Block } from './block-detection.js';
import type { ProxyStatus } from './proxy-status.js';

/** Why the service refused a route (`reason` of GET /api/sessions/{key}/refusal, docs/api.md). */
export type RefusalReason = 'no_exit_in_country' | 'country_wait_timeout' | 'no_routable_instance' | 'session_limit';

/** Refusals worth retrying later: the pool was busy, not asked for a country without exits. */
const RETRYABLE_REASONS: ReadonlySet<string> = new Set(['country_wait_timeout', 'no_routable_instance', 'session_limit']);

/** Where the client learned of a refusal: the proxy's own answer, or the service, asked because the library hid it. */
export type RefusalSource = 'proxy' | 'service';

/** The HTTP proxy refused the request itself (the destination never saw it). */
export class ProxyRefusedError extends Error {
  constructor(
    readonly status: number,
    readonly proxyStatus: ProxyStatus,
    /** The service's reason when it was asked (source 'service'); undefined when read from the proxy's answer. */
    readonly reason?: RefusalReason,
    readonly source: RefusalSource = 'proxy',
  ) {
    super(`exitpool refused the request (${status} ${proxyStatus.error}${reason ? `, ${reason}` : ''}): ${proxyStatus.details}`);
    this.name = 'ProxyRefusedError';
  }

  /** The username's parameters were malformed (HTTP 400). */
  get badParameters(): boolean {
    return this.status === 400;
  }

  /** Worth retrying later: the pool was busy (503), not a country without any exit or a bad request. */
  get retryable(): boolean {
    if (this.reason !== undefined) return RETRYABLE_REASONS.has(this.reason);
    // Read from the proxy's answer: its details name a country without exits ("no exit in fr: …", docs/api.md).
    return this.status === 503 && !this.proxyStatus.details.startsWith('no exit in');
  }
}

/** SOCKS5 reply codes (RFC 1928) as exitpool uses them before any dial. */
export const SOCKS_REPLY_REASONS: Readonly<Record<number, string>> = {
  1: 'general failure (no instance can serve the request)',
  2: 'not allowed by ruleset (malformed session parameters in the username)',
  3: 'network unreachable (no exit in the countries asked for)',
  4: 'host unreachable',
  5: 'connection refused by the destination',
};

/** The SOCKS5 listener refused the connection with this reply code. */
export class SocksReplyError extends Error {
  constructor(
    readonly code: number,
    /** The service's reason and words, when it was asked (the library hid them). */
    readonly reason?: RefusalReason,
    readonly details = '',
  ) {
    super(`the SOCKS5 proxy refused the connection: reply ${code}, ${SOCKS_REPLY_REASONS[code] ?? 'unknown'}${details ? `: ${details}` : ''}`);
    this.name = 'SocksReplyError';
  }

  get retryable(): boolean {
    return this.reason !== undefined ? RETRYABLE_REASONS.has(this.reason) : this.code === 1;
  }
}

/** Every try was blocked; the last response (the client's own object) is kept. */
export class StillBlockedError extends Error {
  constructor(
    readonly block: Block,
    readonly attempts: number,
    readonly response: unknown,
  ) {
    super(`still blocked after ${attempts} tries: ${block.kind} (${block.reason})`);
    this.name = 'StillBlockedError';
  }
}

/**
 * The session was moved after a block, but not to a new exit (`new_exit: false`): retrying would
 * go back to an exit the site has seen, so the loop stops here. `note` is the service's reason
 * (`exit_note`); `exitIp` where the session is now.
 */
export class NoFreshExitError extends Error {
  constructor(
    readonly note: string,
    readonly exitIp: string,
    readonly block: Block,
    readonly response: unknown,
  ) {
    super(`no fresh exit after a ${block.kind} block${note ? `: ${note}` : ''}`);
    this.name = 'NoFreshExitError';
  }
}

/** An API call the client makes on the session's behalf failed. */
export class ExitpoolApiError extends Error {
  constructor(
    readonly status: number,
    readonly body: string,
  ) {
    super(`exitpool API answered ${status}: ${body.trim().slice(0, 200)}`);
    this.name = 'ExitpoolApiError';
  }
}
