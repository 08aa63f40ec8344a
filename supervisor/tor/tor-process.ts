import { spawn, type ChildProcess } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { createInterface } from 'node:readline';

/**
 * One tor child process: spawned in the foreground (`tor -f <torrc>`, RunAsDaemon 0) so it stays
 * our child and is always reaped; stdout/stderr delivered line by line; stopped with SIGTERM, a
 * grace period, then SIGKILL of that PID. Every spawned process is awaited until 'exit' (or a
 * spawn error), so none becomes a zombie.
 */

export interface ProcessExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Set when the binary could not be started at all (ENOENT, EACCES). */
  spawnError?: string;
}

export interface TorProcessOptions {
  torBinary: string;
  torrcPath: string;
  /** Passed as --defaults-torrc so no system-wide defaults file can add options. */
  defaultsTorrc?: string;
  env?: NodeJS.ProcessEnv;
}

export interface TorProcessEvents {
  line: [{ stream: 'stdout' | 'stderr'; text: string }];
  exit: [ProcessExit];
}

export const DEFAULT_STOP_GRACE_MS = 10_000;
/** After SIGKILL the kernel reaps promptly; this only bounds a pathological wait. */
const KILL_WAIT_MS = 5_000;

export class TorProcess extends EventEmitter<TorProcessEvents> {
  private child: ChildProcess | undefined;
  private exitInfo: ProcessExit | undefined;
  private startedAtMs: number | undefined;
  readonly exited: Promise<ProcessExit>;
  private resolveExited!: (exit: ProcessExit) => void;

  constructor(private readonly options: TorProcessOptions) {
    super();
    this.exited = new Promise<ProcessExit>((resolve) => (this.resolveExited = resolve));
  }

  /** Spawns tor. Never throws for a missing binary: that arrives as an exit with spawnError. */
  start(): void {
    if (this.child) throw new Error('tor process already started');
    this.startedAtMs = Date.now();
    const args = this.options.defaultsTorrc ? ['--defaults-torrc', this.options.defaultsTorrc] : [];
    const child = spawn(this.options.torBinary, [...args, '-f', this.options.torrcPath], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: this.options.env ?? process.env,
      // A process group of its own: a terminal's Ctrl-C reaches the supervisor, which drains the
      // proxies and then stops tor itself, instead of every tor exiting under live connections.
      // Still our child (awaited, reaped), and __OwningControllerProcess ends it if we die.
      detached: true,
    });
    this.child = child;
    for (const stream of ['stdout', 'stderr'] as const) {
      const input = child[stream];
      if (!input) continue;
      const lines = createInterface({ input, crlfDelay: Infinity });
      lines.on('line', (text) => this.emit('line', { stream, text }));
    }
    child.once('error', (error) => {
      // Only a failed spawn leaves no PID; errors of a running child (failed kill) are not exits.
      if (child.pid === undefined) this.finish({ code: null, signal: null, spawnError: error.message });
    });
    child.once('exit', (code, signal) => this.finish({ code, signal }));
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get running(): boolean {
    return this.child !== undefined && this.child.pid !== undefined && this.exitInfo === undefined;
  }

  get startedAt(): number | undefined {
    return this.startedAtMs;
  }

  get exitStatus(): ProcessExit | undefined {
    return this.exitInfo;
  }

  /** Sends a signal to this PID if it is still ours and alive. */
  signal(signal: NodeJS.Signals): boolean {
    if (!this.running) return false;
    try {
      return this.child!.kill(signal);
    } catch {
      return false;
    }
  }

  /**
   * SIGTERM (plus SIGCONT, in case the process is stopped and could not act on it), wait up to
   * `graceMs`, then SIGKILL this PID. Resolves once the process has exited and been reaped.
   */
  async stop(graceMs = DEFAULT_STOP_GRACE_MS): Promise<ProcessExit> {
    if (!this.child) {
      this.finish({ code: null, signal: null });
      return this.exited;
    }
    if (!this.running) return this.exited;
    this.signal('SIGTERM');
    this.signal('SIGCONT');
    if (await this.exitWithin(graceMs)) return this.exited;
    this.signal('SIGKILL');
    if (!(await this.exitWithin(KILL_WAIT_MS))) {
      throw new Error(`tor pid ${this.pid} did not exit after SIGKILL`);
    }
    return this.exited;
  }

  private async exitWithin(ms: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
    try {
      return await Promise.race([this.exited.then(() => true as const), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  private finish(exit: ProcessExit): void {
    if (this.exitInfo) return;
    this.exitInfo = exit;
    this.resolveExited(exit);
    this.emit('exit', exit);
  }
}
