/**
 * Deadlines of the proxy listeners. Docs name these constants instead of copying the numbers.
 */

/**
 * A SOCKS5 client must finish greeting, credentials and request within this time after it
 * connects. Loopback and LAN clients need milliseconds; the deadline only stops slowloris-style
 * clients from holding sockets.
 */
export const SOCKS_HANDSHAKE_TIMEOUT_MS = 10_000;

/** An HTTP proxy client must deliver a whole request head within this time of its first byte (408 otherwise). */
export const HTTP_HEAD_TIMEOUT_MS = 10_000;

/** A keep-alive HTTP proxy connection with no request in progress is closed after this long. */
export const HTTP_KEEP_ALIVE_IDLE_TIMEOUT_MS = 60_000;

/**
 * Deadline for tor to answer a CONNECT. Tor gives up on its own after SocksTimeout (120 s by
 * default); a shorter deadline answers the client while a retry is still useful.
 */
export const UPSTREAM_DIAL_TIMEOUT_MS = 60_000;

/**
 * A relayed connection (SOCKS tunnel, HTTP CONNECT tunnel, or a plain HTTP exchange waiting for
 * its response) with no traffic in either direction for this long is closed.
 */
export const RELAY_IDLE_TIMEOUT_MS = 300_000;

/**
 * After the HTTP proxy decides to close a connection it keeps reading (and dropping) what the
 * client still sends for up to this long. Closing a socket with unread data makes the kernel send
 * a reset, which can destroy the error response before the client reads it (a 407 to a POST).
 */
export const HTTP_CLOSE_LINGER_MS = 2_000;

/**
 * A connection refused over the worker's budget lingers this long at most for the client to read
 * its refusal; shorter than HTTP_CLOSE_LINGER_MS because refused sockets are outside the budget.
 */
export const OVER_BUDGET_LINGER_MS = 500;

export interface ProxyTimeouts {
  socksHandshakeMs: number;
  httpHeadMs: number;
  httpKeepAliveIdleMs: number;
  dialMs: number;
  relayIdleMs: number;
}

export const DEFAULT_PROXY_TIMEOUTS: Readonly<ProxyTimeouts> = Object.freeze({
  socksHandshakeMs: SOCKS_HANDSHAKE_TIMEOUT_MS,
  httpHeadMs: HTTP_HEAD_TIMEOUT_MS,
  httpKeepAliveIdleMs: HTTP_KEEP_ALIVE_IDLE_TIMEOUT_MS,
  dialMs: UPSTREAM_DIAL_TIMEOUT_MS,
  relayIdleMs: RELAY_IDLE_TIMEOUT_MS,
});

export function resolveTimeouts(overrides: Partial<ProxyTimeouts> | undefined): ProxyTimeouts {
  return { ...DEFAULT_PROXY_TIMEOUTS, ...overrides };
}
