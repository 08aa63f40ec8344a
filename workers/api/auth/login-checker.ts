import { createHash, timingSafeEqual } from 'node:crypto';
import { verifyAdminPassword } from '../../../shared/auth/admin-password.js';
import type { ApiCredentialSnapshot } from '../../../shared/auth/credential-snapshot.js';

function userDigest(user: string): Buffer {
  return createHash('sha256').update(user, 'utf8').digest();
}

/**
 * Checks a sign-in. A wrong user and a wrong password give the same answer (false) after the
 * same work: the bcrypt comparison always runs, and always against the real hash, whether or not
 * the user matched. Comparing against the real hash rather than a separate dummy one makes the
 * cost identical by construction (same cost factor, same input length), with no second hash to
 * keep in step when the stored hash's cost changes. The user names are compared as SHA-256
 * digests with timingSafeEqual, so their lengths do not show either.
 */
export class LoginChecker {
  private readonly adminUserDigest: Buffer;

  constructor(private readonly snapshot: Pick<ApiCredentialSnapshot, 'adminUser' | 'passwordHash'>) {
    this.adminUserDigest = userDigest(snapshot.adminUser);
  }

  get adminUser(): string {
    return this.snapshot.adminUser;
  }

  async check(user: string, password: string): Promise<boolean> {
    const userMatches = timingSafeEqual(userDigest(user), this.adminUserDigest);
    const passwordMatches = await verifyAdminPassword(password, this.snapshot.passwordHash);
    return userMatches && passwordMatches;
  }
}
