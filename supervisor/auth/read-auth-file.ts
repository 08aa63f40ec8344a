import type { Logger } from '../../shared/logger.js';
import { errorMessage } from '../../shared/errors/error-message.js';
import { AuthFileShapeError, MAX_AUTH_FILE_BYTES, parseAuthFile, type ParsedAuthFile } from './auth-file.js';
import { AuthStoreCorruptError } from './errors.js';
import { readSmallRegularFile } from './small-regular-file.js';

/** Mode auth.json is written with and tightened to. */
export const AUTH_FILE_MODE = 0o600;

/** null when the file does not exist; otherwise its checked contents, or AuthStoreCorruptError. */
export function readAuthFile(file: string, log: Logger): Promise<ParsedAuthFile | null> {
  return readSmallRegularFile(file, MAX_AUTH_FILE_BYTES, async ({ bytes, mode, chmod }) => {
    let text: string;
    try {
      text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    } catch {
      throw new AuthStoreCorruptError(file, 'is not UTF-8 text');
    }
    let contents: ParsedAuthFile;
    try {
      contents = parseAuthFile(text);
    } catch (e) {
      if (e instanceof AuthFileShapeError) throw new AuthStoreCorruptError(file, e.message);
      throw e;
    }
    // Too-open permissions are fixed rather than refused: the file holds only digests, the fix
    // is safe and obvious, and refusing would stop a restart over a umask or a copy. Done only
    // once the file is known to be good, so a refused file is left exactly as it was found.
    if ((mode & 0o077) !== 0) {
      try {
        await chmod(AUTH_FILE_MODE);
        log.warn('auth.json was readable by others; its mode is now 0600', { file, was: mode.toString(8) });
      } catch (e) {
        log.warn('auth.json is readable by others and its mode could not be fixed', { file, error: errorMessage(e) });
      }
    }
    return contents;
  });
}
