import cluster, { type Worker } from 'node:cluster';
import { EventEmitter } from 'node:events';
import type { Logger } from '../../shared/logger.js';
import { StartupError } from '../startup/startup-error.js';
import { IpcEndpoint, channelToWorker, type Known } from '../../shared/ipc/index.js';
import {
  ROLE_ENV,
  SLOT_ENV,
  type SupervisorEndpoint,
  type SupervisorNotices,
  type WorkerRole,
} from '../../shared/ipc/protocol.js';

export interface WorkerSpec {
  role: WorkerRole;
  count: number;
}

export interface RestartBackoff {
  /** Delay before the first re-fork of a slot that crashed. */
  baseMs: number;
  /** Ceiling of the doubling delay. */
  maxMs: number;
  /** A worker that lived this long counts as healthy: its slot's crash streak resets. */
  resetAfterMs: number;
}

export const DEFAULT_RESTART_BACKOFF: RestartBackoff = { baseMs: 100, maxMs: 10_000, resetAfterMs: 30_000 };
/** How long a worker may take to close its listeners after the shutdown notice before SIGKILL. */
export const WORKER_SHUTDOWN_GRACE_MS = 5_000;
/** Beyond its grace, a worker gets this long to flush and exit before it is SIGKILLed. */
export const WORKER_EXIT_MARGIN_MS = 2_000;

/**
 * The most a worker's V8 young generation may take per semi-space, in MiB. Left to V8, a proxy
 * worker's young generation grows to its maximum under load and stays there: a worker went from
 * 65 MiB once ready to 190 MiB after the peers bench, against about 90 MiB with this bound and
 * no measurable change in CPU per connection (docs/performance.md, "Next to the peers", RSS).
 * A --max-semi-space-size in NODE_OPTIONS is left to win.
 */
export const WORKER_SEMI_SPACE_MIB = 4;

/**
 * The workers' garbage collector runs on their own thread (V8's --single-threaded-gc), without
 * the helper threads that scavenge in parallel and mark and sweep concurrently. A worker's heap
 * is small and its garbage short-lived (some 27 KiB per proxied request, dead once it ends), so
 * the helpers save a pause of a millisecond or two and cost more CPU in all than they save: with
 * this flag a proxy worker spent about 8 % less CPU per proxied request on a 2-core machine,
 * where every helper thread also competes with the tors (docs/performance.md, "Stop 45", "The
 * workers' garbage collector"). `--no-single-threaded-gc` among the supervisor's own Node flags
 * turns it off (Node does not take this V8 flag in NODE_OPTIONS).
 */
export const WORKER_GC_FLAG = '--single-threaded-gc';

/**
 * The workers' Node flags: the given ones, plus the young-generation bound (unless NODE_OPTIONS or
 * the given flags set one) and the single-threaded collector (unless the given flags say either).
 */
export function workerExecArgv(given: readonly string[], nodeOptions: string | undefined): string[] {
  const inGiven = (name: string): boolean => given.some((flag) => flag.includes(name));
  const flags = [...given];
  if (!inGiven('--max-semi-space-size') && nodeOptions?.includes('--max-semi-space-size') !== true) flags.push(`--max-semi-space-size=${WORKER_SEMI_SPACE_MIB}`);
  if (!inGiven('single-threaded-gc')) flags.push(WORKER_GC_FLAG);
  return flags;
}

export interface WorkerManagerOptions {
  /** The compiled worker entry point. */
  exec: string;
  specs: readonly WorkerSpec[];
  /** Extra environment for every worker (the encoded configuration). */
  env: Record<string, string>;
  /** Node flags for the workers (benchmarks pass --cpu-prof); default: the supervisor's own. */
  execArgv?: string[];
  log: Logger;
  backoff?: RestartBackoff;
  ipcTimeoutMs?: number;
  /** Called for every new worker before it can send anything: register IPC handlers here. */
  attach?(handle: WorkerHandle): void;
}

export interface WorkerHandle {
  readonly role: WorkerRole;
  readonly slot: number;
  readonly worker: Worker;
  readonly endpoint: SupervisorEndpoint;
  readonly startedAt: number;
  ready: boolean;
  /** Why the worker could not start (it says so before exiting), if it could not. */
  startFailure: { setting: string; message: string } | null;
}

interface SlotState {
  role: WorkerRole;
  slot: number;
  crashStreak: number;
  handle: WorkerHandle | null;
  restartTimer: NodeJS.Timeout | null;
}

/**
 * Owns the worker processes: forks them, knows when they are ready, re-forks one that dies
 * (doubling the delay while a slot keeps crashing), and stops them all on shutdown.
 * Events: 'ready' (handle), 'exit' (handle, code, signal), 'restart' (role, slot, delayMs).
 */
export class WorkerManager extends EventEmitter {
  private readonly slots: SlotState[] = [];
  private stopping = false;
  private readonly backoff: RestartBackoff;
  private restartCount = 0;
  /** Set during start(): a worker that exits before it is ready ends the start instead of being re-forked. */
  private failStart: ((error: Error) => void) | null = null;
  /** start() failed: workers still exiting are not re-forked (the caller stops everything). */
  private startFailed = false;

  constructor(private readonly options: WorkerManagerOptions) {
    super();
    this.backoff = options.backoff ?? DEFAULT_RESTART_BACKOFF;
    let slot = 0;
    for (const spec of options.specs) {
      for (let i = 0; i < spec.count; i++) {
        this.slots.push({ role: spec.role, slot: slot++, crashStreak: 0, handle: null, restartTimer: null });
      }
    }
  }

  /** Re-forks so far, across all slots (a metric). */
  get restarts(): number {
    return this.restartCount;
  }

  /** Forks every worker and resolves once all have reported ready. */
  async start(readyTimeoutMs = 30_000): Promise<void> {
    // The kernel hands connections to the workers directly: with the default round-robin
    // policy the primary would accept every connection itself and pass it over IPC, which
    // costs latency and puts the proxy hot path on the supervisor's event loop.
    cluster.schedulingPolicy = cluster.SCHED_NONE;
    cluster.setupPrimary({
      exec: this.options.exec,
      args: [],
      silent: false,
      execArgv: workerExecArgv(this.options.execArgv ?? process.execArgv, process.env.NODE_OPTIONS),
    });
    const ready = this.slots.map(
      (s) =>
        new Promise<void>((resolve, reject) => {
          const timer = setTimeout(
            () => reject(new Error(`${s.role} worker ${s.slot} not ready within ${readyTimeoutMs} ms`)),
            readyTimeoutMs,
          );
          const onReady = (h: WorkerHandle): void => {
            if (h.slot !== s.slot) return;
            clearTimeout(timer);
            this.off('ready', onReady);
            resolve();
          };
          this.on('ready', onReady);
        }),
    );
    const failed = new Promise<never>((_, reject) => {
      this.failStart = reject;
    });
    for (const s of this.slots) this.fork(s);
    try {
      await Promise.race([Promise.all(ready), failed]);
    } finally {
      this.failStart = null;
    }
  }

  handles(role?: WorkerRole): WorkerHandle[] {
    return this.slots
      .map((s) => s.handle)
      .filter((h): h is WorkerHandle => h !== null && h.ready && (role === undefined || h.role === role));
  }

  /**
   * Every worker of `role` whose process is alive, ready or still starting: a proxy worker may
   * route (and hold route leases) from its first listener on, before its ready notice arrives.
   */
  liveHandles(role: WorkerRole): WorkerHandle[] {
    return this.slots
      .map((s) => s.handle)
      .filter((h): h is WorkerHandle => h !== null && h.role === role && !h.worker.isDead());
  }

  broadcast<T extends Known<SupervisorNotices>>(topic: T, data: SupervisorNotices[T], role?: WorkerRole): void {
    for (const h of this.handles(role)) h.endpoint.notify(topic, data);
  }

  /**
   * Stops re-forking, asks every worker to shut down within `graceMs` (open connections may finish
   * meanwhile), and SIGKILLs those still alive WORKER_EXIT_MARGIN_MS after it.
   */
  async stop(graceMs = WORKER_SHUTDOWN_GRACE_MS): Promise<void> {
    this.stopping = true;
    const exits: Promise<void>[] = [];
    for (const s of this.slots) {
      if (s.restartTimer) clearTimeout(s.restartTimer);
      s.restartTimer = null;
      const h = s.handle;
      if (!h || h.worker.isDead()) continue;
      exits.push(
        new Promise<void>((resolve) => {
          const kill = setTimeout(() => {
            this.options.log.warn('worker did not exit in time; killing it', { worker: h.role, slot: h.slot, pid: h.worker.process.pid });
            h.worker.process.kill('SIGKILL');
          }, graceMs + WORKER_EXIT_MARGIN_MS);
          h.worker.once('exit', () => {
            clearTimeout(kill);
            resolve();
          });
          h.endpoint.notify('shutdown', { graceMs });
        }),
      );
    }
    await Promise.all(exits);
  }

  private fork(state: SlotState): void {
    state.restartTimer = null;
    const worker = cluster.fork({
      ...this.options.env,
      [ROLE_ENV]: state.role,
      [SLOT_ENV]: String(state.slot),
    });
    const endpoint: SupervisorEndpoint = new IpcEndpoint(channelToWorker(worker), this.options.ipcTimeoutMs);
    const handle: WorkerHandle = { role: state.role, slot: state.slot, worker, endpoint, startedAt: Date.now(), ready: false, startFailure: null };
    state.handle = handle;
    this.options.attach?.(handle);
    endpoint.onNotice('start-failed', (failure) => {
      handle.startFailure = failure;
    });
    endpoint.onNotice('ready', () => {
      handle.ready = true;
      this.options.log.debug('worker ready', { worker: state.role, slot: state.slot, pid: worker.process.pid });
      this.emit('ready', handle);
    });
    worker.once('exit', (code: number | null, signal: string | null) => {
      endpoint.close();
      if (state.handle === handle) state.handle = null;
      this.emit('exit', handle, code, signal);
      if (this.stopping) return;
      if (this.startFailed) return;
      if (!handle.ready && this.failStart !== null) {
        this.startFailed = true;
        const f = handle.startFailure;
        this.failStart(
          f !== null
            ? new StartupError(f.setting, f.message)
            : new Error(`${state.role} worker ${state.slot} exited before it was ready (code ${code}, signal ${signal})`),
        );
        return;
      }
      const lived = Date.now() - handle.startedAt;
      state.crashStreak = lived >= this.backoff.resetAfterMs ? 0 : state.crashStreak + 1;
      const delay = Math.min(this.backoff.maxMs, this.backoff.baseMs * 2 ** Math.max(0, state.crashStreak - 1));
      this.options.log.error('worker died; re-forking', {
        worker: state.role,
        slot: state.slot,
        pid: worker.process.pid,
        code,
        signal,
        delayMs: delay,
      });
      this.restartCount += 1;
      this.emit('restart', state.role, state.slot, delay);
      state.restartTimer = setTimeout(() => {
        if (!this.stopping) this.fork(state);
      }, delay);
    });
  }
}
