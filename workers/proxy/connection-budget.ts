/**
 * The most client connections one proxy worker holds at once, shared by all its listeners
 * (SOCKS5, HTTP, session ports). Every held connection costs the worker two file descriptors
 * (client and instance) and its buffers, and the descriptor limit is per process, so the bound
 * is per worker (MAX_CONNECTIONS_PER_WORKER). A connection over the bound is refused at once,
 * never queued: the count falls as connections end, so a flood passes without a lasting lock-up.
 *
 * Connections that have not yet proved a credential (a SOCKS5 handshake before its credentials
 * are accepted, an HTTP connection before its first authenticated request head) are also kept in
 * arrival order, and at most MAX_UNAUTHENTICATED_PER_WORKER of them are held. Whenever a new
 * connection needs room (over either bound), the OLDEST unauthenticated connection is evicted:
 * its handshake deadline is cut to now. A client that never authenticates therefore cannot hold
 * slots that a real client needs, because real clients authenticate within milliseconds and the
 * idle ones are always the oldest. An authenticated connection is never evicted; only when every
 * held connection is authenticated is a new one refused.
 */
import type { Logger } from '../../shared/logger.js';
import { ThrottledWarning } from '../../shared/logging/throttled-warning.js';

/** A refusal (or an eviction) is logged at most this often per worker, with the number since the last line. */
export const REFUSAL_LOG_INTERVAL_MS = 10_000;

/** What the budget may end to make room: the connection tears itself down (and releases its slot) synchronously. */
export interface EvictableConnection {
  destroy(): void;
}

/** A node of the arrival-ordered list of unauthenticated connections (O(1) link, unlink and oldest). */
interface Waiting {
  readonly connection: EvictableConnection;
  older: Waiting | null;
  newer: Waiting | null;
}

export class ConnectionBudget {
  private held = 0;
  private refusedSinceReport = 0;
  private evictedSinceReport = 0;
  private readonly waiting = new Map<EvictableConnection, Waiting>();
  private oldest: Waiting | null = null;
  private newest: Waiting | null = null;
  private readonly refusals: ThrottledWarning;
  private readonly evictions: ThrottledWarning;
  /** At most this many unauthenticated connections (never more than the whole limit). */
  readonly unauthenticatedLimit: number;

  constructor(
    readonly limit: number,
    log: Logger,
    now: () => number = () => performance.now(),
    unauthenticatedLimit: number = limit,
  ) {
    this.unauthenticatedLimit = Math.min(unauthenticatedLimit, limit);
    const options = { intervalMs: REFUSAL_LOG_INTERVAL_MS, now };
    this.refusals = new ThrottledWarning(log, 'connection refused: this proxy worker holds its maximum of authenticated connections', options);
    this.evictions = new ThrottledWarning(log, 'unauthenticated connection evicted to make room for a new one', options);
  }

  get inUse(): number {
    return this.held;
  }

  /** Connections held that have not authenticated yet. */
  get unauthenticated(): number {
    return this.waiting.size;
  }

  /**
   * true when a new connection may be held, after evicting the oldest unauthenticated connection
   * if the worker is full; false (counted and logged) when every held connection is authenticated.
   */
  tryAcquire(listener: string): boolean {
    if (this.held >= this.limit && !this.evictOldest(listener)) {
      this.refusedSinceReport += 1;
      this.refusals.note({
        listener,
        limit: this.limit,
        setting: 'MAX_CONNECTIONS_PER_WORKER',
      });
      return false;
    }
    this.held += 1;
    return true;
  }

  /** A connection just acquired starts out unauthenticated; over MAX_UNAUTHENTICATED_PER_WORKER the oldest makes room. */
  holdUnauthenticated(connection: EvictableConnection, listener: string): void {
    if (this.waiting.has(connection)) return;
    const node: Waiting = { connection, older: this.newest, newer: null };
    if (this.newest !== null) this.newest.newer = node;
    else this.oldest = node;
    this.newest = node;
    this.waiting.set(connection, node);
    if (this.waiting.size > this.unauthenticatedLimit) this.evictOldest(listener);
  }

  /** The connection proved a credential (or, without auth, sent a complete request): never evicted from now on. */
  authenticated(connection: EvictableConnection): void {
    this.unlink(connection);
  }

  /** The connection ended (closed, destroyed or evicted). */
  release(connection?: EvictableConnection): void {
    if (connection !== undefined) this.unlink(connection);
    this.held = Math.max(0, this.held - 1);
  }

  /** Refusals since the previous call (for the accounting batch and so /metrics). */
  takeRefusedCount(): number {
    const n = this.refusedSinceReport;
    this.refusedSinceReport = 0;
    return n;
  }

  /** Evictions since the previous call (for the accounting batch and so /metrics). */
  takeEvictedCount(): number {
    const n = this.evictedSinceReport;
    this.evictedSinceReport = 0;
    return n;
  }

  /** Writes the refusal and eviction counts not yet logged (shutdown). */
  flushLog(): void {
    this.refusals.flush();
    this.evictions.flush();
  }

  private evictOldest(listener: string): boolean {
    const victim = this.oldest;
    if (victim === null) return false;
    this.unlink(victim.connection);
    this.evictedSinceReport += 1;
    this.evictions.note({ listener, unauthenticatedLimit: this.unauthenticatedLimit, setting: 'MAX_UNAUTHENTICATED_PER_WORKER' });
    // destroy() releases the victim's slot synchronously (ListeningServer.release), so `held`
    // has room again when this returns.
    victim.connection.destroy();
    return true;
  }

  private unlink(connection: EvictableConnection): void {
    const node = this.waiting.get(connection);
    if (node === undefined) return;
    this.waiting.delete(connection);
    if (node.older !== null) node.older.newer = node.newer;
    else this.oldest = node.newer;
    if (node.newer !== null) node.newer.older = node.older;
    else this.newest = node.older;
  }
}
