import type { RateLimit } from '../../../shared/config/values.js';
import { parseAuthorizationHeader } from './authorization-header.js';
import { classifyCredential } from '../../../shared/auth/credential-kind.js';
import { isNewerSnapshot, type ApiCredentialSnapshot } from '../../../shared/auth/credential-snapshot.js';
import { AuthBadRequestError, TicketNotAllowedError } from '../../../shared/auth/errors.js';
import { parseLoginBody } from './login-body.js';
import { LoginChecker } from './login-checker.js';
import { createHmac } from 'node:crypto';
import { DeviceCookies } from './device-cookie.js';
import { MAX_TRACKED_LOGIN_ADDRESSES } from '../../../shared/auth/login-rate-limiter.js';
import { LocalSignInLimiter, signInBucket, type SignInLimiter } from '../../../shared/auth/sign-in-limit.js';
import type { Principal } from '../../../shared/auth/principal.js';
import { SignInCredentials, type LoginResult, type TicketResult } from './sign-in-credentials.js';
import { TokenVerifier } from '../../../shared/auth/token-verifier.js';

export type ApiAuthFailure = 'missing' | 'malformed' | 'invalid' | 'expired';

/** Every failure is a 401 with `WWW-Authenticate: wwwAuthenticate(reason)`. */
export type ApiAuthOutcome = { ok: true; principal: Principal } | { ok: false; reason: ApiAuthFailure };

export interface ApiAuthRequest {
  /** The raw Authorization header value (req.headers.authorization). */
  authorization: unknown;
  /** The raw `ticket` query value. Looked at only when `allowTicket` is true. */
  ticket?: unknown;
  /** True on GET /api/stream only: the one place a ticket is a credential. */
  allowTicket?: boolean;
}

export type SignInOutcome =
  /** `deviceCookie`: a new device cookie value for the browser (null under AUTH_DISABLED). */
  | { kind: 'signed-in'; result: LoginResult; deviceCookie: string | null }
  | { kind: 'bad-request'; message: string }
  | { kind: 'refused' }
  | { kind: 'rate-limited'; retryAfterSeconds: number };

export interface ApiAuthSettings {
  loginTtlMs: number;
  loginRateLimit: RateLimit;
}

export interface ApiAuthOptions {
  now?: () => number;
  maxTrackedAddresses?: number;
  /** Where failed sign-ins are counted; by default in this process (the service passes the supervisor's). */
  limiter?: SignInLimiter;
}

/** The value of WWW-Authenticate on a 401 (RFC 6750 3: error only when a credential was sent). */
export function wwwAuthenticate(reason: ApiAuthFailure): string {
  if (reason === 'missing') return 'Bearer realm="exitpool"';
  return 'Bearer realm="exitpool", error="invalid_token"';
}

/** Everything derived from one snapshot; replaced as a whole, never mutated. */
interface Derived {
  snapshot: ApiCredentialSnapshot;
  tokens: TokenVerifier;
  credentials: SignInCredentials;
  login: LoginChecker;
  devices: DeviceCookies;
}

/**
 * The API worker's whole authentication: bearer credentials (token or session credential), the
 * stream ticket, sign-in with its rate limit, and ticket minting. Built from the snapshot the
 * supervisor pushes; `update` swaps in a newer one (the rate limiter survives the swap).
 */
export class ApiAuthenticator {
  private derived: Derived;
  private readonly limiter: SignInLimiter;
  private readonly now: () => number;

  constructor(
    snapshot: ApiCredentialSnapshot,
    private readonly settings: ApiAuthSettings,
    options: ApiAuthOptions = {},
  ) {
    this.now = options.now ?? Date.now;
    this.limiter = options.limiter ?? new LocalSignInLimiter(settings.loginRateLimit, options.maxTrackedAddresses ?? MAX_TRACKED_LOGIN_ADDRESSES, this.now);
    this.derived = this.derive(snapshot);
  }

  get version(): number {
    return this.derived.snapshot.version;
  }

  get authDisabled(): boolean {
    return this.derived.snapshot.authDisabled;
  }

  get adminUser(): string {
    return this.derived.snapshot.adminUser;
  }

  /** Takes a pushed snapshot; false (and nothing changes) when it is not newer than the current one. */
  update(snapshot: ApiCredentialSnapshot): boolean {
    if (!isNewerSnapshot(this.derived.snapshot, snapshot)) return false;
    this.derived = this.derive(snapshot);
    return true;
  }

  authenticate(request: ApiAuthRequest): ApiAuthOutcome {
    const d = this.derived;
    if (d.snapshot.authDisabled) return { ok: true, principal: { kind: 'anonymous-auth-disabled' } };
    const header = parseAuthorizationHeader(request.authorization);
    if (header.kind === 'none') {
      if (request.allowTicket === true && request.ticket !== undefined) return this.authenticateTicket(d, request.ticket);
      return { ok: false, reason: 'missing' };
    }
    // Basic is for the proxy port; on the API it is as good as a malformed header.
    if (header.kind !== 'bearer') return { ok: false, reason: 'malformed' };
    switch (classifyCredential(header.credential)) {
      case 'token': {
        const token = d.tokens.verify(header.credential);
        return token === null ? { ok: false, reason: 'invalid' } : { ok: true, principal: { kind: 'token', ...token } };
      }
      case 'jwt': {
        const check = d.credentials.verifySessionCredential(header.credential);
        return check.ok ? { ok: true, principal: check.principal } : { ok: false, reason: check.reason };
      }
      case 'malformed':
        return { ok: false, reason: 'malformed' };
    }
  }

  /**
   * POST /api/auth/login. Under AUTH_DISABLED anything signs in, unlimited. Otherwise the body is
   * checked, then the attempt is counted in its bucket (sign-in-limit.ts: the device of a valid
   * `deviceCookie`, else address and user), then the password is checked.
   */
  async signIn(body: unknown, clientAddress: string, deviceCookie: string | null = null): Promise<SignInOutcome> {
    const d = this.derived;
    if (d.snapshot.authDisabled) return { kind: 'signed-in', result: d.credentials.issueSession(), deviceCookie: null };
    let request;
    try {
      request = parseLoginBody(body);
    } catch (e) {
      if (e instanceof AuthBadRequestError) return { kind: 'bad-request', message: e.message };
      throw e;
    }
    const bucket = signInBucket(clientAddress, request.user, d.devices.verify(deviceCookie, request.user));
    const decision = await this.limiter.attempt(bucket);
    if (!decision.allowed) return { kind: 'rate-limited', retryAfterSeconds: decision.retryAfterSeconds };
    if (!(await d.login.check(request.user, request.password))) return { kind: 'refused' };
    this.limiter.succeeded(bucket);
    return { kind: 'signed-in', result: d.credentials.issueSession(), deviceCookie: d.devices.issue(request.user) };
  }

  /** POST /api/auth/ticket. Throws TicketNotAllowedError (403) for anything but a session credential. */
  mintTicket(principal: Principal): TicketResult {
    const d = this.derived;
    if (principal.kind === 'session') return d.credentials.issueTicket(principal);
    if (principal.kind === 'anonymous-auth-disabled') {
      return d.credentials.issueTicket({ kind: 'session', user: d.snapshot.adminUser });
    }
    throw new TicketNotAllowedError(principal.kind);
  }

  private authenticateTicket(d: Derived, ticket: unknown): ApiAuthOutcome {
    if (typeof ticket !== 'string') return { ok: false, reason: 'malformed' };
    const check = d.credentials.verifyTicket(ticket);
    return check.ok ? { ok: true, principal: check.principal } : { ok: false, reason: check.reason };
  }

  private derive(snapshot: ApiCredentialSnapshot): Derived {
    return {
      snapshot,
      tokens: TokenVerifier.fromSnapshot(snapshot),
      credentials: new SignInCredentials(snapshot.signingKey, snapshot.adminUser, this.settings.loginTtlMs, this.now),
      login: new LoginChecker(snapshot),
      // Its own key, so a device cookie can never pass for a sign-in credential or a ticket.
      devices: new DeviceCookies(createHmac('sha256', Buffer.from(snapshot.signingKey, 'base64')).update('exitpool device cookies').digest(), this.now),
    };
  }
}
