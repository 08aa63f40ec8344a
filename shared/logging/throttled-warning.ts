import type { Logger } from '../logger.js';

/** Default spacing of the lines a ThrottledWarning writes. */
export const THROTTLED_LOG_INTERVAL_MS = 10_000;

export interface ThrottledWarningOptions {
  /** At most one line per this many milliseconds. */
  intervalMs?: number;
  level?: 'warn' | 'info' | 'error';
  /** Monotonic clock in ms; performance.now by default. */
  now?: () => number;
}

/**
 * A warning that hostile traffic can trigger thousands of times a second (refused credentials,
 * refused connections, rate-limited sign-ins). Each occurrence is counted; a line is written at
 * most once per interval, carrying the count since the previous line (`occurrences`) and the
 * fields of the occurrence that triggered it. What would be lost is only the fields of the
 * occurrences in between, never their number: `flush()` writes what is still pending (shutdown).
 */
export class ThrottledWarning {
  private pending = 0;
  private lastLineAt = Number.NEGATIVE_INFINITY;
  private lastFields: Record<string, unknown> = {};
  private readonly intervalMs: number;
  private readonly level: 'warn' | 'info' | 'error';
  private readonly now: () => number;

  constructor(
    private readonly log: Logger,
    private readonly message: string,
    options: ThrottledWarningOptions = {},
  ) {
    this.intervalMs = options.intervalMs ?? THROTTLED_LOG_INTERVAL_MS;
    this.level = options.level ?? 'warn';
    this.now = options.now ?? (() => performance.now());
  }

  /** Counts one occurrence; writes a line when the interval since the last one has passed. */
  note(fields: Record<string, unknown> = {}): void {
    this.pending += 1;
    this.lastFields = fields;
    const t = this.now();
    if (t - this.lastLineAt < this.intervalMs) return;
    this.lastLineAt = t;
    this.write();
  }

  /** Writes the occurrences counted since the last line, if any. */
  flush(): void {
    if (this.pending > 0) this.write();
  }

  private write(): void {
    this.log.log(this.level, this.message, { ...this.lastFields, occurrences: this.pending });
    this.pending = 0;
  }
}
