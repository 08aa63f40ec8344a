/**
 * A small tmpfs to serve as a service's DATA_DIR, so a test can make it full (a filler file
 * takes every free block) while the service runs, and a way to make a directory unwritable. As
 * root, file modes do not stop writes, so real filesystem conditions are the only honest way to
 * make auth.json unwritable. Needs root (mount, chattr); the tests fail rather than skip without it.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export class TmpfsError extends Error {
  constructor(what: string, cause: unknown) {
    const detail = (cause as { stderr?: Buffer }).stderr?.toString().trim() || (cause as Error).message;
    super(`${what}: ${detail} (the fault tests need root for mount and chattr)`);
    this.name = 'TmpfsError';
  }
}

function run(what: string, args: string[]): void {
  try {
    execFileSync(args[0] as string, args.slice(1), { stdio: 'pipe' });
  } catch (e) {
    throw new TmpfsError(what, e);
  }
}

export class Tmpfs {
  private readonly filler: string;
  private mounted = true;

  private constructor(readonly dir: string) {
    this.filler = path.join(dir, '.fault-filler');
  }

  /** Mounts a fresh tmpfs of `sizeBytes` on a new directory under the system temp dir. */
  static mount(sizeBytes: number): Tmpfs {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-faults-tmpfs-'));
    try {
      run('mount tmpfs', ['mount', '-t', 'tmpfs', '-o', `size=${sizeBytes},mode=0700`, 'tmpfs', dir]);
    } catch (e) {
      fs.rmdirSync(dir);
      throw e;
    }
    return new Tmpfs(dir);
  }

  /** Takes every free block with a filler file; writes then fail with ENOSPC. */
  fill(): void {
    const fd = fs.openSync(this.filler, 'w');
    const chunk = Buffer.alloc(1 << 20);
    try {
      for (;;) fs.writeSync(fd, chunk);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOSPC') throw e;
    } finally {
      fs.closeSync(fd);
    }
    // The last partial block: write single bytes until nothing fits.
    const tail = fs.openSync(this.filler, 'a');
    try {
      for (;;) fs.writeSync(tail, Buffer.alloc(512));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOSPC') throw e;
    } finally {
      fs.closeSync(tail);
    }
  }

  unfill(): void {
    fs.rmSync(this.filler, { force: true });
  }

  /** Unmounts (lazily, in case a process still holds a file) and removes the mount point. */
  unmount(): void {
    if (!this.mounted) return;
    this.mounted = false;
    run('unmount tmpfs', ['umount', '-l', this.dir]);
    fs.rmdirSync(this.dir);
  }
}

/**
 * Sets or clears the immutable attribute of a directory (chattr +i): nothing can be created,
 * renamed or removed in it, even by root, while files below it stay writable. A remount
 * read-only is refused while the service's tors hold files open for writing, so this is how
 * the tests make DATA_DIR read-only for the credential store without stopping its tors.
 */
export function setImmutable(dir: string, immutable: boolean): void {
  run(immutable ? 'chattr +i' : 'chattr -i', ['chattr', immutable ? '+i' : '-i', dir]);
}
