import type { HealthClock, HealthTimer } from './health-clock.js';
import type { RemediationPlan, RemediationRung } from './remediation-ladder.js';

/** What a rung can do to an instance; the lead wires these to the real tor instance. */
export interface RemediationActions {
  /** New circuit (NEWNYM and retire the old exit's circuits). */
  newCircuit(): Promise<void>;
  /** Stop, delete the DataDirectory, start: a new identity. */
  wipeRestart(): Promise<void>;
  /** Stop and start, keeping guards and the cached consensus. */
  restart(): Promise<void>;
  /** Resolves once bootstrapped; rejects after timeoutMs. */
  waitUntilReady(timeoutMs: number): Promise<void>;
}

export interface RemediationTimeouts {
  /** Ceiling for the rung's action itself (a control command, a process stop and spawn). */
  actionTimeoutMs: number;
  /** Ceiling for the bootstrap after the action: a stall is caught here and the ladder moves on. */
  readyTimeoutMs: number;
}

/** Defaults: tor's own stall detector restarts a stuck bootstrap, so readiness gets two rounds. */
export const DEFAULT_ACTION_TIMEOUT_MS = 60_000;
export function defaultReadyTimeoutMs(bootstrapStallTimeoutMs: number): number {
  return 2 * bootstrapStallTimeoutMs;
}

export class RemediationTimeoutError extends Error {
  constructor(
    readonly rung: RemediationRung,
    readonly step: 'action' | 'ready',
    readonly timeoutMs: number,
  ) {
    super(step === 'action' ? `${rung} did not finish within ${timeoutMs} ms` : `not bootstrapped within ${timeoutMs} ms after ${rung}`);
    this.name = 'RemediationTimeoutError';
  }
}

export type RungOutcome = { status: 'done' } | { status: 'failed'; error: Error } | { status: 'cancelled' };

interface Run {
  cancelled: boolean;
  timers: Set<HealthTimer>;
  cancel: () => void;
}

const CANCELLED = Symbol('cancelled');

function asError(e: unknown): Error {
  return e instanceof Error ? e : new Error(String(e));
}

/**
 * Runs one rung of the ladder at a time: waits the plan's delay, performs the action, waits
 * for readiness, each step under a timeout on the injected clock. It never throws: every
 * problem comes back as an outcome, so the caller can always move the instance on (retry or
 * climb) and nothing stays stuck in remediating. cancel() (release, stop) abandons the run at
 * once and clears its timers; an action already started cannot be recalled, its result is
 * simply ignored.
 */
export class RemediationExecutor {
  private current: Run | null = null;

  constructor(
    private readonly actions: RemediationActions,
    private readonly clock: HealthClock,
    private readonly timeouts: RemediationTimeouts,
  ) {}

  get busy(): boolean {
    return this.current !== null;
  }

  /** Starts a rung, cancelling any run still going. onBegin fires when the delay is over. */
  async run(plan: RemediationPlan, onBegin: () => void): Promise<RungOutcome> {
    this.cancel();
    let cancelRun = (): void => {};
    const cancelled = new Promise<typeof CANCELLED>((resolve) => {
      cancelRun = () => resolve(CANCELLED);
    });
    const run: Run = { cancelled: false, timers: new Set(), cancel: cancelRun };
    this.current = run;
    try {
      // Even without a delay, yield once: the caller is mid-transition when it starts a run,
      // and onBegin must not re-enter it.
      const waited = plan.delayMs > 0 ? this.sleep(run, plan.delayMs) : Promise.resolve();
      if ((await Promise.race([waited, cancelled])) === CANCELLED) return { status: 'cancelled' };
      if (run.cancelled) return { status: 'cancelled' };
      onBegin();
      if (run.cancelled) return { status: 'cancelled' };
      const action = this.within(run, this.start(plan.rung), this.timeouts.actionTimeoutMs, plan.rung, 'action');
      if ((await Promise.race([action, cancelled])) === CANCELLED) return { status: 'cancelled' };
      const ready = this.within(run, this.invoke(() => this.actions.waitUntilReady(this.timeouts.readyTimeoutMs)), this.timeouts.readyTimeoutMs, plan.rung, 'ready');
      if ((await Promise.race([ready, cancelled])) === CANCELLED) return { status: 'cancelled' };
      return { status: 'done' };
    } catch (e) {
      return run.cancelled ? { status: 'cancelled' } : { status: 'failed', error: asError(e) };
    } finally {
      for (const t of run.timers) t.cancel();
      run.timers.clear();
      if (this.current === run) this.current = null;
    }
  }

  /** Abandons the current run (if any); its run() resolves to cancelled. */
  cancel(): void {
    const run = this.current;
    if (!run) return;
    this.current = null;
    run.cancelled = true;
    for (const t of run.timers) t.cancel();
    run.timers.clear();
    run.cancel();
  }

  private start(rung: RemediationRung): Promise<void> {
    switch (rung) {
      case 'new_circuit':
        return this.invoke(() => this.actions.newCircuit());
      case 'wipe_restart':
        return this.invoke(() => this.actions.wipeRestart());
      case 'restart_backoff':
        return this.invoke(() => this.actions.restart());
    }
  }

  /** A synchronous throw becomes a rejection, so one path handles both. */
  private invoke(action: () => Promise<void>): Promise<void> {
    try {
      return Promise.resolve(action());
    } catch (e) {
      return Promise.reject(asError(e));
    }
  }

  private sleep(run: Run, ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = this.clock.setTimer(ms, () => {
        run.timers.delete(timer);
        resolve();
      });
      run.timers.add(timer);
    });
  }

  private within(run: Run, work: Promise<void>, ms: number, rung: RemediationRung, step: 'action' | 'ready'): Promise<void> {
    return new Promise((resolve, reject) => {
      const timer = this.clock.setTimer(ms, () => {
        run.timers.delete(timer);
        reject(new RemediationTimeoutError(rung, step, ms));
      });
      run.timers.add(timer);
      work.then(
        () => {
          timer.cancel();
          run.timers.delete(timer);
          resolve();
        },
        (e: unknown) => {
          timer.cancel();
          run.timers.delete(timer);
          reject(asError(e));
        },
      );
    });
  }
}
