/**
 * Longest session key, in UTF-8 bytes: what a SOCKS5 username can carry (RFC 1929). The HTTP
 * proxy and the API apply the same limit, so every session the proxies create can be looked
 * up, rotated and deleted by its key.
 */
export const MAX_SESSION_KEY_BYTES = 255;

export function sessionKeyTooLong(key: string): boolean {
  return Buffer.byteLength(key, 'utf8') > MAX_SESSION_KEY_BYTES;
}

/** Key of the session DEFAULT_SESSION=ip gives a caller that names none: this prefix and its address. */
export const IP_SESSION_PREFIX = 'ip:';

export function isAddressSessionKey(key: string): boolean {
  return key.startsWith(IP_SESSION_PREFIX);
}

/** Key of the session DEFAULT_SESSION=shared gives every caller that names none. */
export const SHARED_SESSION_KEY = 'shared';

/**
 * The session a connection belongs to: the key its caller named, else what DEFAULT_SESSION
 * gives it (its address's session, the shared one, or none: `random` picks per connection).
 * The supervisor routes by it and the proxy workers cache routes by it, so both must agree.
 */
export function resolveSessionKey(named: string | null, clientIp: string, mode: 'ip' | 'random' | 'shared'): string | null {
  if (named !== null) return named;
  if (mode === 'ip') return IP_SESSION_PREFIX + clientIp;
  if (mode === 'shared') return SHARED_SESSION_KEY;
  return null;
}
