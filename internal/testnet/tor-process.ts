import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import type { Logger } from '../../shared/logger.js';
import { isEmergencyTeardown, trackChildPid, untrackChildPid } from './emergency-teardown.js';
import { TestnetError, TorExitedError, TorStartTimeoutError } from './errors.js';

export interface TorExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

export interface TorProcessOptions {
  /** Nickname or label used in logs and errors. */
  readonly name: string;
  readonly torBinary: string;
  readonly torrcPath: string;
  /** An empty defaults file, so /etc/tor/torrc-defaults can never add options. */
  readonly defaultsTorrc: string;
  readonly env: NodeJS.ProcessEnv;
  /** tor's own stdout/stderr (before its Log line takes over, and the shim's refusals). */
  readonly outputFile: string;
  /** Files whose last lines explain a failure (the output file is always included). */
  readonly logFiles?: readonly string[];
  readonly log: Logger;
}

export const SPAWNED_PID_FILE = 'spawned.pid';
export const DEFAULT_STOP_GRACE_MS = 5_000;
const PID_FILE_POLL_MS = 50;
const AFTER_SIGKILL_WAIT_MS = 5_000;

/**
 * One tor in the foreground as a child of this process (never RunAsDaemon: a daemonised tor
 * becomes init's child and nobody reaps it). Its PID is written next to its torrc at once, so
 * a later run can reap it even if tor never got as far as writing its PidFile.
 */
export class TorProcess {
  readonly name: string;
  readonly pid: number;
  readonly exited: Promise<TorExit>;
  private readonly child: ChildProcess;
  private readonly options: TorProcessOptions;
  private exitInfo: TorExit | undefined;
  private stopping = false;
  private readonly unexpectedExitListeners: Array<(exit: TorExit) => void> = [];

  private constructor(child: ChildProcess, pid: number, options: TorProcessOptions) {
    this.child = child;
    this.pid = pid;
    this.name = options.name;
    this.options = options;
    this.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        const exit: TorExit = { code, signal };
        this.exitInfo = exit;
        untrackChildPid(pid);
        if (!this.stopping && !isEmergencyTeardown()) {
          options.log.error('tor exited unexpectedly', { node: this.name, pid, code, signal });
          for (const listener of this.unexpectedExitListeners) listener(exit);
        } else {
          options.log.debug('tor exited', { node: this.name, pid, code, signal });
        }
        resolve(exit);
      });
    });
  }

  static spawn(options: TorProcessOptions): TorProcess {
    const output = openSync(options.outputFile, 'a');
    let child: ChildProcess;
    try {
      child = spawn(options.torBinary, ['--defaults-torrc', options.defaultsTorrc, '-f', options.torrcPath], {
        stdio: ['ignore', output, output],
        env: options.env,
        cwd: path.dirname(options.torrcPath),
        // A process group of its own: a terminal's Ctrl-C reaches the demo (which stops the
        // network in order) and not every tor at once. Still our child: awaited and reaped.
        detached: true,
      });
    } finally {
      closeSync(output);
    }
    const pid = child.pid;
    if (pid === undefined) {
      // spawn reports ENOENT/EACCES asynchronously; the PID is missing exactly in that case.
      child.once('error', () => undefined);
      throw new TestnetError(`could not spawn ${options.torBinary} for ${options.name}`);
    }
    trackChildPid(pid, options.name);
    child.once('error', (err) => options.log.error('tor process error', { node: options.name, pid, error: err.message }));
    writeFileSync(path.join(path.dirname(options.torrcPath), SPAWNED_PID_FILE), `${pid}\n`);
    options.log.debug('tor spawned', { node: options.name, pid });
    return new TorProcess(child, pid, options);
  }

  get hasExited(): boolean {
    return this.exitInfo !== undefined;
  }

  get exitStatus(): TorExit | undefined {
    return this.exitInfo;
  }

  onUnexpectedExit(listener: (exit: TorExit) => void): void {
    this.unexpectedExitListeners.push(listener);
  }

  /** Resolves once tor wrote its PidFile (configuration parsed, libraries loaded). */
  async waitForPidFile(pidFile: string, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (this.exitInfo) throw this.exitedError(this.exitInfo);
      try {
        if (readFileSync(pidFile, 'utf8').trim() === String(this.pid)) return;
      } catch {
        // not written yet
      }
      if (Date.now() > deadline) throw new TorStartTimeoutError(this.name, timeoutMs, this.logTail());
      await delay(PID_FILE_POLL_MS);
    }
  }

  exitedError(exit: TorExit): TorExitedError {
    return new TorExitedError(this.name, exit.code, exit.signal, this.logTail());
  }

  /** SIGTERM, then SIGKILL after the grace: a tor has been seen to log "exiting cleanly" and live on. */
  async stop(graceMs: number = DEFAULT_STOP_GRACE_MS): Promise<TorExit> {
    this.stopping = true;
    if (this.exitInfo) return this.exitInfo;
    this.signal('SIGTERM');
    const controller = new AbortController();
    const graceExpired = delay(graceMs, 'grace' as const, { signal: controller.signal }).catch(() => 'cancelled' as const);
    const first = await Promise.race([this.exited, graceExpired]);
    controller.abort();
    if (first !== 'grace' && first !== 'cancelled') return first;
    // A known tor quirk on these machines (TESTNET-NOTES: a few stops in a hundred), handled
    // here: the network's own relays, so not a warning for whoever runs the tests or the demo.
    this.options.log.info('tor ignored SIGTERM, killing', { node: this.name, pid: this.pid, graceMs });
    this.signal('SIGKILL');
    const killController = new AbortController();
    const killWait = delay(AFTER_SIGKILL_WAIT_MS, undefined, { signal: killController.signal }).catch(() => undefined);
    const final = await Promise.race([this.exited, killWait]);
    killController.abort();
    if (final === undefined) {
      this.options.log.error('tor still alive after SIGKILL', { node: this.name, pid: this.pid });
      return { code: null, signal: 'SIGKILL' };
    }
    return final;
  }

  private signal(signal: NodeJS.Signals): void {
    try {
      this.child.kill(signal);
    } catch {
      // exited in the meantime
    }
  }

  /** The last lines of the tor's output and log files, for error messages. */
  logTail(lines = 15): string {
    const files = [this.options.outputFile, ...(this.options.logFiles ?? [])];
    return files
      .map((file) => {
        try {
          const text = readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
          return `--- ${path.basename(file)}\n${text}`;
        } catch {
          return `--- ${path.basename(file)} (missing)`;
        }
      })
      .join('\n');
  }
}
