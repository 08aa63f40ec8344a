import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { childPids } from '../processes/inspection.js';

/** Where `exec` collects a command's output inside the container (a bind mount). */
const EXEC_DIR = '/exitpool-exec';

/** The parts of an OCI image configuration the tests read (buildah inspect's OCIv1.config). */
export interface OciImageConfig {
  readonly User?: string;
  readonly Env?: readonly string[];
  readonly Entrypoint?: readonly string[];
  readonly Cmd?: readonly string[];
  readonly WorkingDir?: string;
  readonly Labels?: Readonly<Record<string, string>>;
  readonly ExposedPorts?: Readonly<Record<string, unknown>>;
  readonly Volumes?: Readonly<Record<string, unknown>>;
  readonly StopSignal?: string;
}

/**
 * buildah with a storage of its own (vfs, in a temporary directory), so a test neither sees nor
 * leaves images in the machine's store, and chroot isolation as on a machine without a
 * container runtime. `destroy()` removes the containers and the storage.
 */
export class BuildahStore {
  readonly dir = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-buildah-'));
  private readonly containers: string[] = [];

  private storageArgs(): string[] {
    return ['--root', path.join(this.dir, 'storage'), '--runroot', path.join(this.dir, 'run'), '--storage-driver', 'vfs'];
  }

  buildah(args: readonly string[]): string {
    return execFileSync('buildah', [...this.storageArgs(), ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 * 2 ** 20 }).trim();
  }

  /** A working container from an OCI archive; returns its name. */
  from(archive: string): string {
    const name = this.buildah(['from', '--quiet', `oci-archive:${archive}`]);
    this.containers.push(name);
    return name;
  }

  config(container: string): OciImageConfig {
    const inspected = JSON.parse(this.buildah(['inspect', '--type', 'container', container])) as { OCIv1: { config: OciImageConfig } };
    return inspected.OCIv1.config;
  }

  /**
   * Runs a command in the container and returns its standard output, trimmed (throws on a
   * non-zero exit). The output goes through files in a bind-mounted directory: buildah 1.28's
   * `run` with chroot isolation loses a short command's piped output now and then (seen here:
   * 2 empty results in 30 runs of one `cat`).
   */
  exec(container: string, command: readonly string[], options: { user?: string } = {}): string {
    const dir = fs.mkdtempSync(path.join(this.dir, 'exec-'));
    // Written by the image's user, whoever that is.
    fs.chmodSync(dir, 0o777);
    try {
      this.buildah([
        'run', '--isolation', 'chroot', ...(options.user ? ['--user', options.user] : []), '--volume', `${dir}:${EXEC_DIR}`, container, '--',
        '/bin/sh', '-c', `"$@" >${EXEC_DIR}/out 2>${EXEC_DIR}/err; echo $? >${EXEC_DIR}/status`, 'sh', ...command,
      ]);
      const read = (name: string): string => fs.readFileSync(path.join(dir, name), 'utf8');
      const status = read('status').trim();
      if (status !== '0') throw new Error(`${command.join(' ')} exited ${status} in the container: ${read('err').trim()}`);
      return read('out').trim();
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }

  /**
   * Starts a command in the container as a child process (`buildah run`, chroot isolation: the
   * host's network, so loopback is shared with the test). The image's user, working directory
   * and environment apply, `env` on top; `mounts` are read-only bind mounts at the same path.
   */
  spawn(container: string, command: readonly string[], options: { env?: Record<string, string>; mounts?: readonly string[] } = {}): ChildProcess {
    const env = Object.entries(options.env ?? {}).flatMap(([k, v]) => ['--env', `${k}=${v}`]);
    const mounts = (options.mounts ?? []).flatMap((m) => ['--volume', `${m}:${m}:ro`]);
    return spawn('buildah', [...this.storageArgs(), 'run', '--isolation', 'chroot', ...env, ...mounts, container, '--', ...command], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  }

  destroy(): void {
    for (const c of this.containers) {
      try {
        this.buildah(['rm', c]);
      } catch {
        // already gone with its storage below
      }
    }
    // vfs layers may hold directories without write permission for their owner.
    execFileSync('chmod', ['-R', 'u+w', this.dir], { stdio: 'ignore' });
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * The processes `buildah run` started inside the container: its descendants whose root is not
 * the host's (buildah's own helpers run in the host's root until they chroot). `buildah run`
 * does not pass a SIGTERM on to them, so a test signals these itself.
 */
export function containerProcesses(buildahPid: number): number[] {
  const all: number[] = [];
  const walk = (pid: number): void => {
    for (const child of childPids(pid)) {
      all.push(child);
      walk(child);
    }
  };
  walk(buildahPid);
  return all.filter((pid) => {
    try {
      return fs.readlinkSync(`/proc/${pid}/root`) !== '/';
    } catch {
      return false;
    }
  });
}

/** A process's command name (/proc/PID/comm), or null once it is gone. */
export function commandName(pid: number): string | null {
  try {
    return fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return null;
  }
}
