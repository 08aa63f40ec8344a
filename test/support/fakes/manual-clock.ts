import type { HealthClock, HealthTimer } from '../../../supervisor/health/health-clock.js';

interface Pending {
  at: number;
  seq: number;
  callback: () => void;
}

/** Lets every promise continuation already queued run (the microtask queue drains before it). */
function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * A clock that moves only when told to, for tests (the ladder's backoff is minutes long) and
 * for the lead's component tests. advance() fires due timers in time order and lets promise
 * chains settle between them, so async code driven by the timers runs as it would in real time.
 */
export class ManualClock implements HealthClock {
  private current: number;
  private seq = 0;
  private readonly pending = new Set<Pending>();

  constructor(start = 0) {
    this.current = start;
  }

  now(): number {
    return this.current;
  }

  setTimer(ms: number, callback: () => void): HealthTimer {
    const entry: Pending = { at: this.current + Math.max(0, ms), seq: this.seq++, callback };
    this.pending.add(entry);
    return { cancel: () => this.pending.delete(entry) };
  }

  get pendingTimers(): number {
    return this.pending.size;
  }

  /** Time of the next timer, or null. */
  nextTimerAt(): number | null {
    let next: number | null = null;
    for (const p of this.pending) if (next === null || p.at < next) next = p.at;
    return next;
  }

  async advance(ms: number): Promise<void> {
    const target = this.current + ms;
    await settle();
    for (;;) {
      let due: Pending | undefined;
      for (const p of this.pending) {
        if (p.at <= target && (due === undefined || p.at < due.at || (p.at === due.at && p.seq < due.seq))) due = p;
      }
      if (!due) break;
      this.pending.delete(due);
      this.current = Math.max(this.current, due.at);
      due.callback();
      await settle();
    }
    this.current = target;
    await settle();
  }

  /** Lets pending promise work finish without moving time. */
  settle(): Promise<void> {
    return settle();
  }
}
