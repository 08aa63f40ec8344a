import { constants as fsConstants } from 'node:fs';
import * as fsp from 'node:fs/promises';
import { errorMessage } from '../../shared/errors/error-message.js';
import { AuthStoreCorruptError } from './errors.js';

/** A small regular file as read: its bytes, its mode, and a way to tighten the mode of the same file. */
export interface SmallFileRead {
  bytes: Buffer;
  /** The permission bits (st_mode & 0o777). */
  mode: number;
  /** chmod on the file that was read (its open handle), not on whatever the path names now. */
  chmod(mode: number): Promise<void>;
}

/**
 * The one reader of the auth store's files (auth.json, signing.key): null when the file does not
 * exist; otherwise `use` gets its bytes, and what it returns is returned. Refuses, with
 * AuthStoreCorruptError, anything but a regular file of at most `maxBytes` (a FIFO planted at
 * the path does not hang the start: it is opened O_NONBLOCK and refused by its type).
 */
export async function readSmallRegularFile<T>(file: string, maxBytes: number, use: (read: SmallFileRead) => Promise<T> | T): Promise<T | null> {
  let handle: fsp.FileHandle;
  try {
    handle = await fsp.open(file, fsConstants.O_RDONLY | fsConstants.O_NONBLOCK);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return null;
    throw new AuthStoreCorruptError(file, `is unreadable (${code ?? errorMessage(e)})`);
  }
  try {
    const stat = await handle.stat();
    if (!stat.isFile()) throw new AuthStoreCorruptError(file, 'is not a regular file');
    if (stat.size > maxBytes) throw new AuthStoreCorruptError(file, `is larger than ${maxBytes} bytes`);
    let bytes: Buffer;
    try {
      bytes = await handle.readFile();
    } catch (e) {
      throw new AuthStoreCorruptError(file, `is unreadable (${(e as NodeJS.ErrnoException).code ?? errorMessage(e)})`);
    }
    // A file that grew between the stat and the read is as oversized as one that was.
    if (bytes.length > maxBytes) throw new AuthStoreCorruptError(file, `is larger than ${maxBytes} bytes`);
    return await use({ bytes, mode: stat.mode & 0o777, chmod: (mode) => handle.chmod(mode) });
  } finally {
    await handle.close();
  }
}
