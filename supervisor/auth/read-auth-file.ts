import { constants as fsConstants } from 'node:fs';
import * as fsp from 'node:fs/promises';
import type { Logger } from '../../shared/logger.js';
import { AuthFileShapeError, MAX_AUTH_FILE_BYTES, parseAuthFile, type ParsedAuthFile } from './auth-file.js';
import { AuthStoreCorruptError } from './errors.js';
import { errorMessage } from '../../shared/errors/error-message.js';

/** Mode auth.json is written with and tightened to. */
export const AUTH_FILE_MODE = 0o600;

/** null when the file does not exist; otherwise its checked contents, or AuthStoreCorruptError. */
export async function readAuthFile(file: string, log: Logger): Promise<ParsedAuthFile | null> {
  let handle: fsp.FileHandle;
  try {
    // O_NONBLOCK: a FIFO planted at the path must not hang the start.
    handle = await fsp.open(file, fsConstants.O_RDONLY | fsConstants.O_NONBLOCK);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return null;
    throw new AuthStoreCorruptError(file, `is unreadable (${code ?? errorMessage(e)})`);
  }
  try {
    const stat = await handle.stat();
    if (!stat.isFile()) throw new AuthStoreCorruptError(file, 'is not a regular file');
    if (stat.size > MAX_AUTH_FILE_BYTES) throw new AuthStoreCorruptError(file, `is larger than ${MAX_AUTH_FILE_BYTES} bytes`);
    let bytes: Buffer;
    try {
      bytes = await handle.readFile();
    } catch (e) {
      throw new AuthStoreCorruptError(file, `is unreadable (${(e as NodeJS.ErrnoException).code ?? errorMessage(e)})`);
    }
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
    if ((stat.mode & 0o077) !== 0) {
      try {
        await handle.chmod(AUTH_FILE_MODE);
        log.warn('auth.json was readable by others; its mode is now 0600', { file, was: (stat.mode & 0o777).toString(8) });
      } catch (e) {
        log.warn('auth.json is readable by others and its mode could not be fixed', { file, error: errorMessage(e) });
      }
    }
    return contents;
  } finally {
    await handle.close();
  }
}
