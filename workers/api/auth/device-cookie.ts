import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * Device cookies (OWASP's defence against lockout by password guessing): a browser that signed
 * in once carries a signed cookie naming a random device id, and its later sign-ins are counted
 * against that device, not against its address. Someone guessing passwords from the same
 * address (a shared NAT, a reverse proxy, the same host) can lock out only attempts without a
 * valid cookie; the operator's browser keeps its way in.
 *
 * Value: `<device id>.<issued, unix seconds>.<HMAC-SHA256 over both and the user>`, keyed by
 * the sign-in signing key, so a change of password, user or signing secret voids every cookie.
 */
export const DEVICE_COOKIE_NAME = 'exitpool_device';
/** How long a device cookie counts, from the sign-in that issued it (each sign-in issues a new one). */
export const DEVICE_COOKIE_TTL_SECONDS = 30 * 24 * 3600;
/** Only the sign-in route reads it. */
export const DEVICE_COOKIE_PATH = '/api/auth/login';
const DEVICE_ID_BYTES = 16;
const VALUE_PATTERN = /^([A-Za-z0-9_-]{22})\.(\d{1,12})\.([A-Za-z0-9_-]{43})$/;
/** Longest Cookie header scanned for it; the HTTP server bounds headers anyway. */
const MAX_COOKIE_HEADER_CHARS = 8192;

function mac(key: Buffer, deviceId: string, issued: number, user: string): Buffer {
  return createHmac('sha256', key).update(`exitpool-device\0${deviceId}\0${issued}\0${user}`, 'utf8').digest();
}

export class DeviceCookies {
  constructor(
    private readonly key: Buffer,
    private readonly now: () => number = Date.now,
  ) {}

  /** A fresh cookie value for `user`. */
  issue(user: string): string {
    const deviceId = randomBytes(DEVICE_ID_BYTES).toString('base64url');
    const issued = Math.floor(this.now() / 1000);
    return `${deviceId}.${issued}.${mac(this.key, deviceId, issued, user).toString('base64url')}`;
  }

  /** The device id of a valid, unexpired cookie value for `user`; null for anything else. */
  verify(value: string | null, user: string): string | null {
    if (value === null) return null;
    const m = VALUE_PATTERN.exec(value);
    if (m === null) return null;
    const [, deviceId, issuedText, tag] = m as unknown as [string, string, string, string];
    const issued = Number(issuedText);
    const age = Math.floor(this.now() / 1000) - issued;
    if (age < 0 || age > DEVICE_COOKIE_TTL_SECONDS) return null;
    // Compared as canonical text: base64 leaves two bits of the last character unused, so two
    // spellings decode to the same bytes, and only the one we issued is the cookie.
    const expected = Buffer.from(mac(this.key, deviceId, issued, user).toString('base64url'));
    const given = Buffer.from(tag);
    return given.length === expected.length && timingSafeEqual(given, expected) ? deviceId : null;
  }
}

/** The Set-Cookie value for `value`: script-proof, sent only to the sign-in route of this site. */
export function deviceSetCookie(value: string): string {
  return `${DEVICE_COOKIE_NAME}=${value}; Path=${DEVICE_COOKIE_PATH}; Max-Age=${DEVICE_COOKIE_TTL_SECONDS}; HttpOnly; SameSite=Strict`;
}

/** The device cookie's value in a Cookie header (the first one), or null. */
export function deviceCookieFrom(header: unknown): string | null {
  if (typeof header !== 'string' || header.length > MAX_COOKIE_HEADER_CHARS) return null;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() === DEVICE_COOKIE_NAME) return part.slice(eq + 1).trim();
  }
  return null;
}
