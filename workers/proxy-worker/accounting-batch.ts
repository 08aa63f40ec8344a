import type { CloseRecord, ListenerKind, ReleasedRoute } from '../../shared/ipc/protocol.js';
import type { ConnectionStats, ProxyEvents, RouteGranted } from '../proxy/proxy-types.js';

/**
 * What a proxy worker's connections report between two accounting notices: every finished
 * connection (a close record), every route handed back unused, and the route round trips. The
 * worker sends it with the connections routed from leases (ACCOUNTING_FLUSH_MS, or when the
 * supervisor asks).
 */
export class AccountingBatch {
  private closes: CloseRecord[] = [];
  private released: ReleasedRoute[] = [];
  private roundTrips: number[] = [];
  /** Set at shutdown: connections cut at the end of the grace are the shutdown's doing, not the instances'. */
  stopping = false;

  constructor(private readonly maxRoundTrips: number) {}

  readonly events: ProxyEvents = {
    connectionOpened: (): void => {
      // Counted already: by the supervisor when it routed it, or as an opened record when the router used a lease.
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
    return this.closes.length === 0 && this.released.length === 0 && this.roundTrips.length === 0;
  }

  /** What was collected since the last call, and a fresh start. */
  take(): { closes: CloseRecord[]; released: ReleasedRoute[]; routeRttMs: number[] } {
    const taken = { closes: this.closes, released: this.released, routeRttMs: this.roundTrips };
    this.closes = [];
    this.released = [];
    this.roundTrips = [];
    return taken;
  }
}
