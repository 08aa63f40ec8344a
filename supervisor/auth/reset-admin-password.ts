import path from 'node:path';
import { ADMIN_PASSWORD_BCRYPT_COST, hashAdminPassword } from '../../shared/auth/admin-password.js';
import type { Logger } from '../../shared/logger.js';
import { writeFileAtomic, type AtomicWriteFileSystem } from './atomic-write.js';
import { AUTH_FILE_NAME, AUTH_FILE_VERSION, serializeAuthFile, type AuthFileContents } from './auth-file.js';
import { generateAdminPassword } from './credential-generator.js';
import { AuthStorePersistError } from './errors.js';
import { AUTH_FILE_MODE, readAuthFile } from './read-auth-file.js';

/** Why `exitpool reset-admin-password` did nothing; the CLI prints the message and exits 78. */
export class AdminPasswordResetRefused extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AdminPasswordResetRefused';
  }
}

export interface AdminPasswordReset {
  /** The new password, in clear: print it once. */
  password: string;
  file: string;
}

/**
 * `exitpool reset-admin-password`: a lost dashboard password is replaced by a new generated one,
 * whose digest goes into auth.json beside the tokens (kept as they are). Works with the service
 * stopped or running: a running service keeps its password until it restarts, and its own saves
 * keep the new digest (AuthStore). Refused while ADMIN_PASSWORD is set (the password is then that
 * variable), without an auth.json (the first start generates and prints one), and for a 0.1.0
 * file (the first start of this version moves its signing secret out first).
 */
export async function resetAdminPassword(options: {
  dataDir: string;
  adminPasswordSet: boolean;
  log: Logger;
  bcryptCost?: number;
  fileSystem?: AtomicWriteFileSystem;
}): Promise<AdminPasswordReset> {
  if (options.adminPasswordSet) {
    throw new AdminPasswordResetRefused('ADMIN_PASSWORD is set, so the dashboard password is its value: change the variable and restart the service');
  }
  const file = path.join(options.dataDir, AUTH_FILE_NAME);
  const parsed = await readAuthFile(file, options.log);
  if (parsed === null) {
    throw new AdminPasswordResetRefused(`there is no ${file} (DATA_DIR=${options.dataDir}): the first start of the service generates the credentials and prints them`);
  }
  if (parsed.legacySigningSecret !== null) {
    throw new AdminPasswordResetRefused(`${file} is from exitpool 0.1.0: start the service once (it converts the file), then run this again`);
  }
  const password = generateAdminPassword();
  const passwordHash = await hashAdminPassword(password, options.bcryptCost ?? ADMIN_PASSWORD_BCRYPT_COST);
  const contents: AuthFileContents = { version: AUTH_FILE_VERSION, admin: { passwordHash }, tokens: parsed.contents.tokens, revoked: parsed.contents.revoked };
  try {
    await writeFileAtomic(file, serializeAuthFile(contents), { mode: AUTH_FILE_MODE, fileSystem: options.fileSystem });
  } catch (e) {
    throw new AuthStorePersistError(file, e);
  }
  return { password, file };
}
