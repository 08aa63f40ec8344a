import { timingSafeEqual } from 'node:crypto';
import type { ProxyCredentialSnapshot } from './credential-snapshot.js';
import type { Principal, Scope } from './principal.js';
import { digestTokenSecret, hasTokenPrefix } from './token-format.js';

export interface VerifiedToken {
  id: string;
  scope: Scope;
}

export type ProxyAuthOutcome = { ok: true; principal: Principal } | { ok: false; reason: 'missing' | 'invalid' };

interface Entry {
  id: string;
  scope: Scope;
  digest: Buffer;
}

/**
 * Verifies token secrets locally in a worker, from the snapshot the supervisor pushed: one
 * SHA-256 and one Map lookup, no IPC, no I/O.
 *
 * Why the lookup leaks nothing useful: the Map is keyed by the digest of the presented secret,
 * so whatever timing the hash table's string comparison shows depends on SHA-256(presented),
 * never on the stored secret itself. Learning that a guess's digest shares its first bytes with
 * a stored digest does not help choose the next guess (the attacker would need a preimage), and
 * the secrets carry ~131 random bits. The timingSafeEqual after the lookup is belt and braces:
 * it makes the final equality check constant-time should the Map ever be replaced by something
 * that returns near matches.
 */
export class TokenVerifier {
  private readonly byDigest: Map<string, Entry>;

  private constructor(
    readonly version: number,
    readonly authDisabled: boolean,
    entries: Entry[],
  ) {
    this.byDigest = new Map(entries.map((e) => [e.digest.toString('hex'), e]));
  }

  static fromSnapshot(snapshot: ProxyCredentialSnapshot): TokenVerifier {
    const entries = snapshot.tokens.map((t) => ({ id: t.id, scope: t.scope, digest: Buffer.from(t.digest, 'hex') }));
    return new TokenVerifier(snapshot.version, snapshot.authDisabled, entries);
  }

  get size(): number {
    return this.byDigest.size;
  }

  /** The token a secret belongs to, or null. Ignores AUTH_DISABLED: it answers "is this a token". */
  verify(secret: string): VerifiedToken | null {
    if (!hasTokenPrefix(secret)) return null;
    const digest = digestTokenSecret(secret);
    const entry = this.byDigest.get(digest);
    if (entry === undefined || !timingSafeEqual(entry.digest, Buffer.from(digest, 'hex'))) return null;
    return { id: entry.id, scope: entry.scope };
  }

  /**
   * The check of a proxy connection (SOCKS5 password, or the password of Proxy-Authorization).
   * Under AUTH_DISABLED anything, including no credential, is admitted. Both token scopes may
   * use the proxy (`admin` includes `proxy`).
   */
  authenticateProxy(password: string | null | undefined): ProxyAuthOutcome {
    if (this.authDisabled) return { ok: true, principal: { kind: 'anonymous-auth-disabled' } };
    if (password === null || password === undefined || password === '') return { ok: false, reason: 'missing' };
    const token = this.verify(password);
    if (token === null) return { ok: false, reason: 'invalid' };
    return { ok: true, principal: { kind: 'token', id: token.id, scope: token.scope } };
  }
}
