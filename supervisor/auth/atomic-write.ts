import { randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import path from 'node:path';

/** The file operations an atomic write needs; tests substitute failing ones. */
export interface WritableFile {
  writeFile(data: string, encoding: 'utf8'): Promise<void>;
  sync(): Promise<void>;
  close(): Promise<void>;
}

export interface AtomicWriteFileSystem {
  open(file: string, flags: string, mode?: number): Promise<WritableFile>;
  rename(from: string, to: string): Promise<void>;
  unlink(file: string): Promise<void>;
}

export const realFileSystem: AtomicWriteFileSystem = {
  open: (file, flags, mode) => fsp.open(file, flags, mode),
  rename: (from, to) => fsp.rename(from, to),
  unlink: (file) => fsp.unlink(file),
};

/**
 * Replaces `file` with `data` so that a crash or a failed write leaves either the old content
 * or the new one, never a mix: write a temporary file in the same directory (created with
 * `mode`, exclusively), fsync it, rename it over the target, fsync the directory so the rename
 * itself is durable. On failure before the rename the temporary file is removed and the target
 * is untouched.
 */
export async function writeFileAtomic(
  file: string,
  data: string,
  options: { mode: number; fileSystem?: AtomicWriteFileSystem | undefined },
): Promise<void> {
  const fs = options.fileSystem ?? realFileSystem;
  const dir = path.dirname(file);
  const temporary = path.join(dir, `.${path.basename(file)}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`);
  let created = false;
  let renamed = false;
  try {
    const handle = await fs.open(temporary, 'wx', options.mode);
    created = true;
    try {
      await handle.writeFile(data, 'utf8');
      await handle.sync();
    } finally {
      await handle.close();
    }
    await fs.rename(temporary, file);
    renamed = true;
    const directory = await fs.open(dir, 'r');
    try {
      await directory.sync();
    } finally {
      await directory.close();
    }
  } catch (e) {
    if (created && !renamed) await fs.unlink(temporary).catch(() => undefined);
    throw e;
  }
}
