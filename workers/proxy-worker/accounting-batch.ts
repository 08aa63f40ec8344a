import type { CloseRecord, ListenerKind, ReachedHost, ReleasedRoute } from '../../shared/ipc/protocol.js';
import type { ConnectionEvidence, ConnectionStats, ProxyEvents, RouteGranted } from '../proxy/proxy-types.js';

/**
 * What a proxy worker's connections report between two accounting notices: the sites a session's
 * connections reached, every finished connection (a close record), every route handed back
 * unused, and the route round trips. The
 * worker sends it with the connections routed from leases (ACCOUNTING_FLUSH_MS, or when the
 * supervisor asks).
 */
export class AccountingBatch {
  /**
   * One record per session, instance, host and credential, the newest: the supervisor's visit log
   * keeps only the newest of these anyway (supervisor/verdicts/visit-log.ts), so a scraper's
   * hundred connections to one site between two flushes travel and are judged as one. Re-inserted
   * on every connection, so the order is that of each one's latest start, as the log would see it.
   */
  private reached = new Map<string, ReachedHost>();
  private closes: CloseRecord[] = [];
  private released: ReleasedRoute[] = [];
  private roundTrips: number[] = [];
  /** Set at shutdown: connections cut at the end of the grace are the shutdown's doing, not the instances'. */
  stopping = false;

  constructor(private readonly maxRoundTrips: number) {}

  readonly events: ProxyEvents = {
    connectionOpened: (route: RouteGranted, _listener: ListenerKind, evidence: ConnectionEvidence): void => {
      // Counted already: by the supervisor when it routed it, or as an opened record when the
      // router used a lease. What it tells the verdicts is sent now: the client may report the
      // site before this connection ends.
      if (route.key === null || evidence.host === '') return;
      const credential = evidence.credential();
      const id = `${route.key}\n${route.instance}\n${evidence.host}\n${credential}`;
      this.reached.delete(id);
      this.reached.set(id, { key: route.key, instance: route.instance, host: evidence.host, credential, at: Date.now() });
    },
    connectionClosed: (route: RouteGranted, _listener: ListenerKind, s: ConnectionStats): void => {
      const failure = s.failure && this.stopping ? { ...s.failure, scored: false } : s.failure;
      const record: CloseRecord = {
        key: route.key,
        session: route.session,
        instance: route.instance,
        bytesUp: s.bytesUp,
        bytesDown: s.bytesDown,
        ok: s.ok,
        latencyMs: failure && failure.kind !== 'socks_refused' ? null : s.latencyMs,
        endedAt: s.endedAt ?? Date.now(),
        host: s.evidence.host,
        credential: s.evidence.credential(),
      };
      if (failure) record.failure = failure;
      this.closes.push(record);
    },
    connectionReleased: (route: RouteGranted): void => {
      this.released.push({ key: route.key, session: route.session, instance: route.instance });
    },
  };

  /** A route round trip's duration, for the IPC histogram (at most maxRoundTrips per batch). */
  noteRoundTrip(ms: number): void {
    if (this.roundTrips.length < this.maxRoundTrips) this.roundTrips.push(ms);
  }

  get isEmpty(): boolean {
    return this.reached.size === 0 && this.closes.length === 0 && this.released.length === 0 && this.roundTrips.length === 0;
  }

  /** What was collected since the last call, and a fresh start. */
  take(): { reached: ReachedHost[]; closes: CloseRecord[]; released: ReleasedRoute[]; routeRttMs: number[] } {
    const taken = { reached: [...this.reached.values()], closes: this.closes, released: this.released, routeRttMs: this.roundTrips };
    this.reached = new Map();
    this.closes = [];
    this.released = [];
    this.roundTrips = [];
    return taken;
  }
}
