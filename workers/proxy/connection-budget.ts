/**
 * The most client connections one proxy worker holds at once, shared by all its listeners
 * (SOCKS5, HTTP, session ports). Every held connection costs the worker two file descriptors
 * (client and instance) and its buffers, and the descriptor limit is per process, so the bound
 * is per worker (MAX_CONNECTIONS_PER_WORKER). A connection over the bound is refused at once,
 * never queued: the count falls as connections end, so a flood passes without a lasting lock-up.
 */
import type { Logger } from '../../shared/logger.js';

/** A refusal is logged at most this often per worker, with the number refused since the last line. */
export const REFUSAL_LOG_INTERVAL_MS = 10_000;

export class ConnectionBudget {
  private held = 0;
  private refusedSinceLog = 0;
  private refusedSinceReport = 0;
  private lastLogAt = -Infinity;

  constructor(
    readonly limit: number,
    private readonly log: Logger,
    private readonly now: () => number = () => performance.now(),
  ) {}

  get inUse(): number {
    return this.held;
  }

  /** true when the connection may be held; false (counted and logged) when the worker is full. */
  tryAcquire(listener: string): boolean {
    if (this.held < this.limit) {
      this.held += 1;
      return true;
    }
    this.refusedSinceLog += 1;
    this.refusedSinceReport += 1;
    const t = this.now();
    if (t - this.lastLogAt >= REFUSAL_LOG_INTERVAL_MS) {
      this.log.warn('connection refused: this proxy worker holds its maximum of connections', {
        listener,
        limit: this.limit,
        refused: this.refusedSinceLog,
        setting: 'MAX_CONNECTIONS_PER_WORKER',
      });
      this.lastLogAt = t;
      this.refusedSinceLog = 0;
    }
    return false;
  }

  release(): void {
    this.held = Math.max(0, this.held - 1);
  }

  /** Refusals since the previous call (for the accounting batch and so /metrics). */
  takeRefusedCount(): number {
    const n = this.refusedSinceReport;
    this.refusedSinceReport = 0;
    return n;
  }
}
