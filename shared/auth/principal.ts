/** A token carries exactly one scope (docs/api.md, "Authentication and access"). */
export type Scope = 'proxy' | 'admin';

export function isScope(value: unknown): value is Scope {
  return value === 'proxy' || value === 'admin';
}

/** Who a request or connection acts as, once its credential has been verified. */
export type Principal =
  | { kind: 'token'; id: string; scope: Scope }
  /** expires: the sign-in credential's expiry (Unix seconds); absent for the AUTH_DISABLED stand-in. */
  | { kind: 'session'; user: string; expires?: number }
  /** sessionExpires: the expiry of the sign-in that minted the ticket; the stream it opens ends then. */
  | { kind: 'ticket'; user: string; sessionExpires?: number }
  | { kind: 'anonymous-auth-disabled' };

/**
 * Whether the principal may use something that needs `needed`.
 *
 * A session credential is interactive and has full access; `admin` includes `proxy`. A ticket
 * answers false for everything: the only thing it opens is the live stream, and the caller
 * admits it there by verifying it with `verifyTicket` rather than by asking for a scope, so no
 * route table entry can grant a ticket anything by accident.
 */
export function hasScope(principal: Principal, needed: Scope): boolean {
  switch (principal.kind) {
    case 'anonymous-auth-disabled':
    case 'session':
      return true;
    case 'ticket':
      return false;
    case 'token':
      return principal.scope === 'admin' || principal.scope === needed;
  }
}
