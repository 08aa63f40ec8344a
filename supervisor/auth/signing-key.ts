import { createHash, createHmac } from 'node:crypto';

/** Size of the random secret kept in auth.json from which the signing key is derived. */
export const SIGNING_SECRET_BYTES = 32;

/** Where the admin password comes from; both change the key when they change. */
export type AdminPasswordSource = { kind: 'stored'; hash: string } | { kind: 'env'; password: string };

/**
 * The HS256 key of sign-in credentials: HMAC-SHA256(storedSecret, adminUser NUL passwordMaterial
 * [NUL "auth-disabled"]).
 *
 * - The stored secret makes the key unguessable and stable across restarts.
 * - The admin user and password material make a change of ADMIN_USER or of the password (a new
 *   ADMIN_PASSWORD, or a regenerated password, whose bcrypt hash has a fresh salt) invalidate
 *   every outstanding credential at once. For ADMIN_PASSWORD the material is its SHA-256, not a
 *   bcrypt hash: bcrypt salts afresh on every boot and would invalidate sign-ins at each restart.
 * - Under AUTH_DISABLED anyone can sign in, so those credentials get a key of their own and stop
 *   working as soon as the flag is removed.
 */
export function deriveSigningKey(
  storedSecret: Buffer,
  adminUser: string,
  password: AdminPasswordSource,
  authDisabled: boolean,
): Buffer {
  const material =
    password.kind === 'stored'
      ? `stored:${password.hash}`
      : `env:${createHash('sha256').update(password.password, 'utf8').digest('hex')}`;
  const hmac = createHmac('sha256', storedSecret).update(`${adminUser}\0${material}`, 'utf8');
  if (authDisabled) hmac.update('\0auth-disabled', 'utf8');
  return hmac.digest();
}
