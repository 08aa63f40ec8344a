import bcrypt from 'bcryptjs';
import { createHash } from 'node:crypto';

/** bcrypt cost of the admin password hash in production (tests pass a lower one). */
export const ADMIN_PASSWORD_BCRYPT_COST = 10;

/**
 * What bcrypt actually hashes: base64(SHA-256(password)), 44 ASCII characters. bcrypt reads only
 * the first 72 bytes of its input and ADMIN_PASSWORD may be up to 1024 characters, so hashing the
 * raw password would accept any password sharing those 72 bytes; the pre-hash makes every byte
 * count and keeps NUL and multi-byte characters away from bcrypt.
 */
function bcryptInput(password: string): string {
  return createHash('sha256').update(password, 'utf8').digest('base64');
}

export function hashAdminPassword(password: string, cost: number = ADMIN_PASSWORD_BCRYPT_COST): Promise<string> {
  return bcrypt.hash(bcryptInput(password), cost);
}

export function verifyAdminPassword(password: string, hash: string): Promise<boolean> {
  return bcrypt.compare(bcryptInput(password), hash);
}

/** A bcrypt hash as bcryptjs writes it ($2a$/$2b$/$2y$, two-digit cost, 53 characters of salt and hash). */
export const BCRYPT_HASH_PATTERN = /^\$2[aby]\$\d{2}\$[./A-Za-z0-9]{53}$/;
