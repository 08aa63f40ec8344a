import jwt from 'jsonwebtoken';
import { classifyCredential } from '../../../shared/auth/credential-kind.js';
import type { Principal } from '../../../shared/auth/principal.js';

/** Lifetime of a stream ticket (60 seconds; docs/api.md, POST /api/auth/ticket). */
export const TICKET_TTL_MS = 60_000;

/** `iss` of every sign-in credential we sign; a JWT from elsewhere fails even with our key. */
const ISSUER = 'exitpool';
/** Pinned: the header's `alg` never chooses the algorithm (no `none`, no RS/HS confusion). */
const ALGORITHM = 'HS256';

export type SignInCredentialType = 'session' | 'ticket';

/** POST /api/auth/login's answer (docs/api.md, "Login result"). */
export interface LoginResult {
  token: string;
  /** Unix seconds. */
  expires: number;
  user: string;
}

/** POST /api/auth/ticket's answer (docs/api.md, "Ticket"). */
export interface TicketResult {
  ticket: string;
  expires_in: number;
}

export type CredentialCheck<P extends Principal> =
  | { ok: true; principal: P; expires: number }
  | { ok: false; reason: 'malformed' | 'invalid' | 'expired' };

interface Claims {
  type: SignInCredentialType;
  sub: string;
  iss: string;
  iat: number;
  exp: number;
  /** Tickets only: the expiry (Unix seconds) of the sign-in that minted them. */
  sx?: number;
}

/**
 * Signs and verifies the two JWT kinds, both HS256 under the key the supervisor derived from
 * the stored secret and the admin credentials (so changing either and restarting invalidates
 * everything outstanding). A session credential comes from login and has full access; a ticket
 * lasts TICKET_TTL_MS and opens only the stream. The `type` claim keeps them apart: each verify
 * method accepts exactly one type, so a ticket fails as a session credential and vice versa.
 */
export class SignInCredentials {
  private readonly key: Buffer;

  constructor(
    signingKeyBase64: string,
    readonly adminUser: string,
    private readonly sessionTtlMs: number,
    private readonly now: () => number = Date.now,
  ) {
    this.key = Buffer.from(signingKeyBase64, 'base64');
    if (this.key.length < 32) throw new RangeError('the signing key must be at least 32 bytes');
  }

  issueSession(): LoginResult {
    const { credential, exp } = this.sign('session', this.sessionTtlMs);
    return { token: credential, expires: exp, user: this.adminUser };
  }

  /**
   * A ticket for the live stream. The type system and this check both insist on a session
   * principal: a ticket (or a token) cannot mint a ticket.
   */
  issueTicket(session: Extract<Principal, { kind: 'session' }>): TicketResult {
    if (session.kind !== 'session') throw new TypeError('only a session credential can mint a ticket');
    const { credential, exp } = this.sign('ticket', TICKET_TTL_MS, session.expires);
    return { ticket: credential, expires_in: Math.max(0, exp - Math.floor(this.now() / 1000)) };
  }

  verifySessionCredential(text: string): CredentialCheck<Extract<Principal, { kind: 'session' }>> {
    const claims = this.verify(text, 'session');
    if (!claims.ok) return claims;
    return { ok: true, principal: { kind: 'session', user: claims.claims.sub, expires: claims.claims.exp }, expires: claims.claims.exp };
  }

  /** Only the stream route calls this; everywhere else a ticket is just an invalid credential. */
  verifyTicket(text: string): CredentialCheck<Extract<Principal, { kind: 'ticket' }>> {
    const claims = this.verify(text, 'ticket');
    if (!claims.ok) return claims;
    const { sx } = claims.claims;
    return { ok: true, principal: { kind: 'ticket', user: claims.claims.sub, ...(sx === undefined ? {} : { sessionExpires: sx }) }, expires: claims.claims.exp };
  }

  private sign(type: SignInCredentialType, ttlMs: number, sessionExpires?: number): { credential: string; exp: number } {
    const nowMs = this.now();
    const iat = Math.floor(nowMs / 1000);
    // A ticket never outlives the sign-in behind it.
    const exp = Math.min(Math.floor((nowMs + ttlMs) / 1000), sessionExpires ?? Number.MAX_SAFE_INTEGER);
    const claims: Claims = { type, sub: this.adminUser, iss: ISSUER, iat, exp, ...(sessionExpires === undefined ? {} : { sx: sessionExpires }) };
    return { credential: jwt.sign(claims, this.key, { algorithm: ALGORITHM }), exp };
  }

  private verify(
    text: string,
    type: SignInCredentialType,
  ): { ok: true; claims: Claims } | { ok: false; reason: 'malformed' | 'invalid' | 'expired' } {
    if (classifyCredential(text) !== 'jwt') return { ok: false, reason: 'malformed' };
    let payload: unknown;
    try {
      payload = jwt.verify(text, this.key, {
        algorithms: [ALGORITHM],
        issuer: ISSUER,
        clockTimestamp: Math.floor(this.now() / 1000),
        clockTolerance: 0,
      });
    } catch (e) {
      return { ok: false, reason: e instanceof jwt.TokenExpiredError ? 'expired' : 'invalid' };
    }
    if (!isClaims(payload) || payload.type !== type || payload.sub !== this.adminUser) return { ok: false, reason: 'invalid' };
    return { ok: true, claims: payload };
  }
}

function isClaims(value: unknown): value is Claims {
  if (typeof value !== 'object' || value === null) return false;
  const c = value as Record<string, unknown>;
  return (
    (c.type === 'session' || c.type === 'ticket') &&
    typeof c.sub === 'string' &&
    typeof c.iss === 'string' &&
    Number.isInteger(c.iat) &&
    // Without `exp`, jsonwebtoken would accept the credential forever.
    Number.isInteger(c.exp) &&
    (c.sx === undefined || (c.type === 'ticket' && Number.isInteger(c.sx)))
  );
}
