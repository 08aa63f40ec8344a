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
