/**
 * The sign-in credential as the dashboard keeps it in sessionStorage (per tab, gone with the
 * tab; there is no server-side sign-out, so forgetting it is signing out).
 */
export interface StoredCredential {
  token: string;
  /** Unix seconds (the login result's `expires`). */
  expires: number;
  user: string;
}

export const CREDENTIAL_STORAGE_KEY = 'exitpool.credential';

/** A credential read back from storage, or null if absent, malformed or expired at `nowMs`. */
export function parseStoredCredential(text: string | null, nowMs: number): StoredCredential | null {
  if (text === null) return null;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  if (typeof value !== 'object' || value === null) return null;
  const v = value as Record<string, unknown>;
  if (typeof v.token !== 'string' || v.token === '') return null;
  if (typeof v.expires !== 'number' || !Number.isFinite(v.expires)) return null;
  if (typeof v.user !== 'string') return null;
  if (v.expires * 1000 <= nowMs) return null;
  return { token: v.token, expires: v.expires, user: v.user };
}

/** Whether a value from POST /api/auth/login has the shape of a login result. */
export function isLoginResult(value: unknown): value is StoredCredential {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Record<string, unknown>;
  return typeof v.token === 'string' && typeof v.expires === 'number' && typeof v.user === 'string';
}

/** Milliseconds until the credential expires (for the sign-out timer), never negative. */
export function msUntilExpiry(c: StoredCredential, nowMs: number): number {
  return Math.max(0, c.expires * 1000 - nowMs);
}
