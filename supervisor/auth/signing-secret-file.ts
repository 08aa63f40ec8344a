import { createHash, randomBytes } from 'node:crypto';
import path from 'node:path';
import type { Logger } from '../../shared/logger.js';
import { writeFileAtomic, type AtomicWriteFileSystem } from './atomic-write.js';
import { AuthStoreCorruptError, AuthStorePersistError } from './errors.js';
import { SIGNING_SECRET_BYTES } from './signing-key.js';
import { readSmallRegularFile } from './small-regular-file.js';

/**
 * The secret sign-in credentials are signed from, kept apart from auth.json: auth.json then
 * holds digests only (as the docs say), and can be copied, backed up or shown for debugging
 * without handing out the power to forge an admin sign-in. Both files are 0600 in DATA_DIR, so
 * a reader of the whole directory still holds every input of the key: SIGNING_SECRET (from the
 * environment, never written) closes that too. See docs/security.md, "What DATA_DIR holds".
 */
export const SIGNING_SECRET_FILE_NAME = 'signing.key';
export const SIGNING_SECRET_FILE_MODE = 0o600;
/** base64 of SIGNING_SECRET_BYTES, a newline optional: the whole file. */
const FILE_PATTERN = /^([A-Za-z0-9+/]{43}=)\n?$/;
/** Larger than any file we write: read no further. */
const MAX_FILE_BYTES = 1024;

export type SigningSecretSource = 'environment' | 'file' | 'generated' | 'migrated';

export interface SigningSecret {
  secret: Buffer;
  source: SigningSecretSource;
}

/** Parses the file's text; null when it is not exactly what writeSigningSecretFile writes. */
export function parseSigningSecretFile(text: string): Buffer | null {
  const m = FILE_PATTERN.exec(text);
  if (m === null) return null;
  const secret = Buffer.from(m[1]!, 'base64');
  return secret.length === SIGNING_SECRET_BYTES ? secret : null;
}

/** null when the file does not exist; AuthStoreCorruptError when it exists and is not ours. */
export function readSigningSecretFile(file: string): Promise<Buffer | null> {
  return readSmallRegularFile(file, MAX_FILE_BYTES, async ({ bytes, mode, chmod }) => {
    const secret = parseSigningSecretFile(bytes.toString('latin1'));
    if (secret === null) {
      throw new AuthStoreCorruptError(file, `does not hold ${SIGNING_SECRET_BYTES} bytes of base64 (delete it to sign everyone out and make a new one)`);
    }
    if ((mode & 0o077) !== 0) await chmod(SIGNING_SECRET_FILE_MODE);
    return secret;
  });
}

/**
 * The signing secret for this start: SIGNING_SECRET when the operator set one (nothing is
 * read or written then), else signing.key, else the secret a 0.1.0 auth.json carried (written
 * to signing.key before auth.json is rewritten without it, so a crash in between loses
 * nothing), else a new random one.
 */
export async function loadSigningSecret(options: {
  dataDir: string;
  operatorSecret: string | null;
  legacySecret: Buffer | null;
  log: Logger;
  fileSystem?: AtomicWriteFileSystem | undefined;
}): Promise<SigningSecret> {
  if (options.operatorSecret !== null) {
    // Hashed so that every operator secret, whatever its length or alphabet, becomes a 32-byte key input.
    return { secret: createHash('sha256').update(`exitpool signing secret\0${options.operatorSecret}`, 'utf8').digest(), source: 'environment' };
  }
  const file = path.join(options.dataDir, SIGNING_SECRET_FILE_NAME);
  const existing = await readSigningSecretFile(file);
  if (existing !== null) return { secret: existing, source: 'file' };
  const secret = options.legacySecret ?? randomBytes(SIGNING_SECRET_BYTES);
  try {
    await writeFileAtomic(file, `${secret.toString('base64')}\n`, { mode: SIGNING_SECRET_FILE_MODE, fileSystem: options.fileSystem });
  } catch (e) {
    throw new AuthStorePersistError(file, e);
  }
  const source: SigningSecretSource = options.legacySecret !== null ? 'migrated' : 'generated';
  options.log.info(source === 'migrated' ? 'moved the signing secret out of auth.json into its own file' : 'created the signing secret', { file });
  return { secret, source };
}
