import type { CloseRecord, OpenedRoute, ReleasedRoute } from '../../shared/ipc/protocol.js';
import type { StatsHistory } from '../stats/stats-history.js';
import type { InstanceRegistry } from './instance-registry.js';

/** Weight of the newest dial latency in an instance's moving average. */
const LATENCY_EWMA_WEIGHT = 0.2;

/** What a finished connection tells whoever judges instances (supervisor/verdicts). */
export interface ConnectionOutcomes {
  connectionSucceeded(r: CloseRecord, now: number): void;
  connectionFailed(r: CloseRecord): void;
}

export interface ConnectionTotals {
  requests: number;
  failures: number;
  bytesUp: number;
  bytesDown: number;
}

/**
 * The pool's accounting of connections: opened (routed, or reported by a worker that used a
 * lease), closed (with bytes, latency and outcome), released (granted but never used), and
 * those a dead worker took with it. `active` on sessions is exact because every open is
 * counted here per worker and undone by its close, its release, or the worker's death.
 */
export class ConnectionLedger {
  /** Per worker slot: its open connections per session incarnation, forgotten if the worker dies. */
  private readonly openByWorker = new Map<number, Map<number, { key: string; count: number }>>();
  private readonly totals: ConnectionTotals = { requests: 0, failures: 0, bytesUp: 0, bytesDown: 0 };

  constructor(
    private readonly registry: InstanceRegistry,
    private readonly stats: StatsHistory,
    private readonly outcomes: ConnectionOutcomes,
    private readonly now: () => number,
  ) {}

  totalsNow(): ConnectionTotals {
    return { ...this.totals };
  }

  /** A connection of session incarnation `session` routed for a worker. */
  countOpen(workerSlot: number, key: string, session: number): void {
    let open = this.openByWorker.get(workerSlot);
    if (!open) this.openByWorker.set(workerSlot, (open = new Map()));
    const entry = open.get(session);
    if (entry) entry.count += 1;
    else open.set(session, { key, count: 1 });
  }

  /** Connections a worker routed with its leases: counted on their sessions as route() counts one. */
  recordOpened(opened: readonly OpenedRoute[], workerSlot: number): void {
    const now = this.now();
    for (const o of opened) {
      if (this.registry.sessions.attach(o.key, o.session, now)) this.countOpen(workerSlot, o.key, o.session);
    }
  }

  /** A batch of finished connections from one worker. */
  recordCloses(records: readonly CloseRecord[], workerSlot: number): void {
    const now = this.now();
    const open = this.openByWorker.get(workerSlot);
    for (const r of records) {
      this.totals.requests += 1;
      if (!r.ok) this.totals.failures += 1;
      this.totals.bytesUp += r.bytesUp;
      this.totals.bytesDown += r.bytesDown;
      this.stats.record(r);
      if (r.key !== null && r.session !== null) {
        this.registry.sessions.close(r.key, r.session, r, now);
        forgetOpen(open, r.session);
      }
      const e = this.registry.entry(r.instance);
      if (!e) continue;
      e.requests += 1;
      e.bytesUp += r.bytesUp;
      e.bytesDown += r.bytesDown;
      if (r.latencyMs !== null) e.latencyMs = e.latencyMs === 0 ? r.latencyMs : e.latencyMs + LATENCY_EWMA_WEIGHT * (r.latencyMs - e.latencyMs);
      if (r.ok) this.outcomes.connectionSucceeded(r, now);
      else {
        e.failures += 1;
        this.outcomes.connectionFailed(r);
      }
    }
  }

  /** Routes a worker granted but never used (the client left before its CONNECT): not requests. */
  recordReleased(routes: readonly ReleasedRoute[], workerSlot: number): void {
    const open = this.openByWorker.get(workerSlot);
    for (const r of routes) {
      if (r.key === null || r.session === null) continue;
      this.registry.sessions.forgetConnections(r.key, r.session, 1);
      forgetOpen(open, r.session);
    }
  }

  /** A proxy worker died: its connections are gone without a close record. */
  workerGone(workerSlot: number): void {
    const open = this.openByWorker.get(workerSlot);
    if (!open) return;
    for (const [session, { key, count }] of open) this.registry.sessions.forgetConnections(key, session, count);
    this.openByWorker.delete(workerSlot);
  }
}

/** One connection of session incarnation `session` on a worker ended (closed or released). */
function forgetOpen(open: Map<number, { key: string; count: number }> | undefined, session: number): void {
  const entry = open?.get(session);
  if (!entry) return;
  if (entry.count <= 1) open?.delete(session);
  else entry.count -= 1;
}
