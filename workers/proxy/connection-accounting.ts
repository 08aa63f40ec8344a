import type { ListenerKind, TransportFailureRecord } from '../../shared/ipc/protocol.js';
import type { ConnectionEvidence, ConnectionStats, ProxyEvents, RouteGranted } from './proxy-types.js';

/** What a connection reports when it ends: the bytes it carried and whether the instance failed it. */
export interface CloseReport {
  bytesUp: number;
  bytesDown: number;
  failure: TransportFailureRecord | null;
  /** The instance's CONNECT latency (or the dial's elapsed time when it failed). */
  latencyMs: number;
  /** When the exchange finished (Date.now()), if known earlier than now (a tunnel's last byte). */
  endedAt?: number;
}

/**
 * One dialled route's accounting: `connectionOpened` when the dial starts, then exactly one
 * `connectionClosed` (later calls are ignored), with the route's duration measured here.
 */
export class OpenedConnection {
  private closedOnce = false;
  private readonly startedAt = performance.now();

  constructor(
    private readonly events: ProxyEvents,
    private readonly listener: ListenerKind,
    readonly route: RouteGranted,
    private readonly evidence: ConnectionEvidence,
  ) {
    events.connectionOpened(route, listener, evidence);
  }

  closed(report: CloseReport): void {
    if (this.closedOnce) return;
    this.closedOnce = true;
    // Built field by field, without spreads: one of these is made per proxied connection.
    const stats: ConnectionStats = {
      bytesUp: report.bytesUp,
      bytesDown: report.bytesDown,
      ok: report.failure === null,
      latencyMs: report.latencyMs,
      durationMs: performance.now() - this.startedAt,
      evidence: this.evidence,
    };
    if (report.failure !== null) stats.failure = report.failure;
    if (report.endedAt !== undefined) stats.endedAt = report.endedAt;
    this.events.connectionClosed(this.route, this.listener, stats);
  }

  /** Milliseconds since the dial started. */
  elapsedMs(): number {
    return performance.now() - this.startedAt;
  }
}

/**
 * The accounting of one listener's connections (ProxyEvents' contract): a route is either
 * `opened` (and later closed exactly once) or `released` when the client left before it was used.
 */
export class ConnectionAccounting {
  constructor(
    private readonly events: ProxyEvents,
    private readonly listener: ListenerKind,
  ) {}

  opened(route: RouteGranted, evidence: ConnectionEvidence): OpenedConnection {
    return new OpenedConnection(this.events, this.listener, route, evidence);
  }

  released(route: RouteGranted): void {
    this.events.connectionReleased(route, this.listener);
  }
}
