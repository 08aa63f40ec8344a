import type { TokenRecord } from './token-record.js';

/**
 * The `auth` audit events (docs/api.md, "Audit event": sign-ins, tokens issued or revoked), shaped to be
 * handed to the supervisor's AuditLog.record. Failed sign-ins and refused proxy credentials are
 * deliberately not events (they are logged), so hostile traffic cannot flush the ring. Never
 * carries a secret.
 */
export interface AuthAuditEntry {
  type: 'auth';
  message: string;
  details: Record<string, unknown>;
}

export function signedInEvent(user: string, clientAddress: string): AuthAuditEntry {
  return { type: 'auth', message: `${user} signed in`, details: { action: 'sign-in', user, address: clientAddress } };
}

export function tokenIssuedEvent(token: TokenRecord): AuthAuditEntry {
  return {
    type: 'auth',
    message: `token ${token.id} (${token.scope}) issued`,
    details: { action: 'token-issued', id: token.id, name: token.name, scope: token.scope },
  };
}

export function tokenRevokedEvent(token: TokenRecord): AuthAuditEntry {
  return {
    type: 'auth',
    message: `token ${token.id} (${token.scope}) revoked`,
    details: { action: 'token-revoked', id: token.id, name: token.name, scope: token.scope },
  };
}
