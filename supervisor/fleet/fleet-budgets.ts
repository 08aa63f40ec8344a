import type { Redis } from 'ioredis';
import type { RateLimit } from '../../shared/config/values.js';
import { errorMessage } from '../../shared/errors/error-message.js';
import type { Logger } from '../../shared/logger.js';
import { ThrottledWarning } from '../../shared/logging/throttled-warning.js';
import type { BudgetCounter, BudgetCounters, BudgetName } from '../verdicts/budget-counter.js';

/** Credentials one budget remembers at once on a node (each entry under 200 bytes); beyond it the least recently used is forgotten. */
export const MAX_TRACKED_CREDENTIALS = 10_000;
/** A credential longer than this is cut in its Redis key (ours are at most about 60 characters). */
const MAX_CREDENTIAL_IN_KEY = 128;

interface Entry {
  /** The window (clock-aligned: Math.floor(now / windowMs)) the counts are of. */
  window: number;
  /** The fleet's count in Redis after this node's last update that reached it. */
  known: number;
  /** Spent here, not yet sent. */
  pending: number;
  /** Sent, not yet answered. */
  inFlight: number;
}

/**
 * The verdicts' per-credential budgets (CLIENT_REPORT_BUDGET, CLIENT_BAN_BUDGET) counted across
 * the fleet (README.md here, "Budgets"): one Redis counter per budget, credential and window
 * (`fleet:budget:<budget>:<window>:<credential>`, windows aligned to the clock, each key kept two
 * windows). A unit is spent here at once, against what this node knows of the fleet's count, and
 * sent off the request path on the next turn of the event loop (INCRBY, batched); the answer is
 * the fleet's count, which this node goes on from. So a node sees the others' spending as of its
 * own last update, and the answer to its next spend puts it right: each node can let one unit
 * through beyond the budget per credential and window (the fleet: the budget plus one unit per
 * other node), plus what several nodes spend within one Redis round trip. While Redis does not answer, each node counts alone,
 * from the fleet's count it last knew: the fleet then spends at most one budget per node, and what
 * was spent meanwhile is added once Redis answers (while its window lasts).
 */
export class FleetBudgets {
  private readonly counters: FleetBudgetCounter[] = [];
  private scheduled: NodeJS.Immediate | null = null;
  private running: Promise<void> | null = null;
  private again = false;
  private stopped = false;
  private readonly unreachable: ThrottledWarning;

  constructor(
    private readonly redis: Redis,
    private readonly poolPrefix: string,
    log: Logger,
  ) {
    this.unreachable = new ThrottledWarning(log, 'the fleet’s budget counters cannot be updated: each node counts alone until Redis answers', { level: 'warn' });
  }

  /** The verdicts' port (supervisor/verdicts/budget-counter.ts): one counter per budget, counted across the fleet. */
  readonly counterFor: BudgetCounters = (budget, limit) => {
    const counter = new FleetBudgetCounter(budget, limit, this.poolPrefix, () => this.soon());
    this.counters.push(counter);
    return counter;
  };

  /** Sends what was spent here (called on the next turn after a spend, and at each renewal for what failed before). */
  flush(): Promise<void> {
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = this.flushOnce().finally(() => {
      this.running = null;
      if (this.again && !this.stopped) {
        this.again = false;
        void this.flush();
      }
    });
    return this.running;
  }

  stop(): void {
    this.stopped = true;
    if (this.scheduled) clearImmediate(this.scheduled);
    this.scheduled = null;
    this.unreachable.flush();
  }

  private soon(): void {
    if (this.stopped) return;
    this.scheduled ??= setImmediate(() => {
      this.scheduled = null;
      void this.flush();
    });
  }

  private async flushOnce(): Promise<void> {
    const sends = this.counters.flatMap((c) => c.takePending());
    if (sends.length === 0) return;
    const pipeline = this.redis.pipeline();
    for (const s of sends) pipeline.incrby(s.key, s.units).pexpire(s.key, 2 * s.windowMs);
    let results: [Error | null, unknown][];
    try {
      results = ((await pipeline.exec()) ?? []) as [Error | null, unknown][];
    } catch (error) {
      results = [];
      this.unreachable.note({ error: errorMessage(error) });
    }
    sends.forEach((s, i) => {
      const [error, total] = results[2 * i] ?? [new Error('no answer'), null];
      if (error === null && typeof total === 'number') s.settled(total);
      else s.failed();
    });
  }
}

/** One sent update: its key and units, and what to do with Redis's answer. */
interface Send {
  key: string;
  units: number;
  windowMs: number;
  settled(total: number): void;
  failed(): void;
}

class FleetBudgetCounter implements BudgetCounter {
  private readonly entries = new Map<string, Entry>();

  constructor(
    private readonly budget: BudgetName,
    private readonly limit: RateLimit,
    private readonly poolPrefix: string,
    private readonly spent: () => void,
  ) {}

  take(credential: string, now: number): boolean {
    const entry = this.entry(credential, now);
    if (entry.known + entry.pending + entry.inFlight >= this.limit.attempts) return false;
    entry.pending++;
    this.spent();
    return true;
  }

  wouldAllow(credential: string, now: number): boolean {
    const entry = this.entries.get(credential);
    if (entry === undefined || entry.window !== this.window(now)) return true;
    return entry.known + entry.pending + entry.inFlight < this.limit.attempts;
  }

  /** What was spent since the last flush, moved in flight. */
  takePending(): Send[] {
    const sends: Send[] = [];
    for (const [credential, entry] of this.entries) {
      if (entry.pending === 0) continue;
      const units = entry.pending;
      entry.inFlight += units;
      entry.pending = 0;
      const window = entry.window;
      sends.push({
        key: `${this.poolPrefix}fleet:budget:${this.budget}:${window}:${credential.slice(0, MAX_CREDENTIAL_IN_KEY)}`,
        units,
        windowMs: this.limit.windowMs,
        // An entry whose window moved on meanwhile was replaced: the answer is about the old one.
        settled: (total) => {
          if (this.entries.get(credential) !== entry) return;
          entry.inFlight -= units;
          entry.known = Math.max(entry.known, total);
        },
        failed: () => {
          if (this.entries.get(credential) !== entry) return;
          entry.inFlight -= units;
          entry.pending += units;
        },
      });
    }
    return sends;
  }

  private window(now: number): number {
    return Math.floor(now / this.limit.windowMs);
  }

  private entry(credential: string, now: number): Entry {
    const window = this.window(now);
    let entry = this.entries.get(credential);
    if (entry === undefined || entry.window !== window) {
      entry = { window, known: 0, pending: 0, inFlight: 0 };
      this.entries.delete(credential);
      while (this.entries.size >= MAX_TRACKED_CREDENTIALS) this.entries.delete(this.entries.keys().next().value as string);
    } else {
      this.entries.delete(credential);
    }
    // Most recently used last: the first is forgotten first.
    this.entries.set(credential, entry);
    return entry;
  }
}
