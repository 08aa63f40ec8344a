import { AUDIT_TYPES, type AuditType } from '../../shared/api/audit-event.js';
import { MAX_SESSION_KEY_BYTES, sessionKeyTooLong } from '../../shared/api/session-key.js';
import { relayFingerprint } from '../../shared/api/relay-fingerprint.js';
import { badRequest } from './http-error.js';

/** Query and path value parsing: anything malformed is a 400 that changes nothing. */

export function booleanQuery(name: string, value: unknown, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (value === 'true' || value === '1') return true;
  if (value === 'false' || value === '0') return false;
  throw badRequest(`${name} must be true, 1, false or 0`);
}

export function integerQuery(name: string, value: unknown, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'string' || !/^\d{1,9}$/.test(value)) throw badRequest(`${name} must be an integer from ${min} to ${max}`);
  const n = Number(value);
  if (n < min || n > max) throw badRequest(`${name} must be an integer from ${min} to ${max}`);
  return n;
}

export function instanceId(value: unknown): number {
  if (typeof value !== 'string' || !/^\d{1,6}$/.test(value)) throw badRequest('instance id must be a non-negative integer');
  return Number(value);
}

/** A relay fingerprint: 40 hexadecimal digits, optionally after `$`. */
export function exitFingerprint(value: unknown): string {
  const fingerprint = relayFingerprint(value);
  if (fingerprint === undefined) throw badRequest('fingerprint must be 40 hexadecimal digits');
  return fingerprint;
}

/** Session keys are what a SOCKS5 username can carry: 1 to 255 bytes. */
export function sessionKey(value: unknown): string {
  if (typeof value !== 'string' || value.length === 0 || sessionKeyTooLong(value)) {
    throw badRequest(`session key must be 1 to ${MAX_SESSION_KEY_BYTES} bytes`);
  }
  return value;
}

/** `type=auth,quarantine`: audit types to list (each at most once); null when absent (all types). */
export function auditTypesQuery(value: unknown): AuditType[] | null {
  if (value === undefined) return null;
  if (typeof value !== 'string' || value === '' || value.length > 200) throw badRequest(`type must be a comma-separated list of ${AUDIT_TYPES.join(', ')}`);
  const types = value.split(',');
  for (const t of types) {
    if (!(AUDIT_TYPES as readonly string[]).includes(t)) throw badRequest(`type must be a comma-separated list of ${AUDIT_TYPES.join(', ')}; got ${JSON.stringify(t.slice(0, 40))}`);
  }
  return [...new Set(types as AuditType[])];
}
