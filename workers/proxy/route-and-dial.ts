import { hopPassword } from '../../shared/auth/hop-credential.js';
import type { Logger } from '../../shared/logger.js';
import type { ConnectionAccounting, OpenedConnection } from './connection-accounting.js';
import { transportFailureOf } from './dial-failure.js';
import { dialWatched, INSTANCE_DOWN_FAILURE, type InstanceDownSignal } from './instance-down.js';
import type { ListenerKind, TransportFailureRecord } from '../../shared/ipc/protocol.js';
import type { ConnectionEvidence, RouteDecision, RouteGranted, RouteRefusalReason } from './proxy-types.js';
import { SocksDialError, type DialedUpstream, type UpstreamAddress } from './socks5-client.js';
import type { Socks5Target } from './socks5-protocol.js';

/**
 * Where a granted route is dialled: the instance's SocksPort, or on another node's session that
 * node's hop listener, with the client's own username (its parameters too) and a hop credential
 * signed for the connection's credential (`credential`: `token:<id>`, or `address:<ip>`), which
 * the owner charges (shared/auth/hop-credential.ts).
 */
export function upstreamOf(route: RouteGranted, username: string | null, credential: () => string): UpstreamAddress {
  const address: UpstreamAddress = { host: route.host, port: route.port };
  if (route.path !== undefined) address.path = route.path;
  if (route.forward !== undefined && username !== null) address.auth = { username, password: hopPassword(route.forward.hop, credential()) };
  return address;
}

/** A dial through one route, abortable (instance down, shutdown). */
export interface RouteDial {
  promise: Promise<DialedUpstream>;
  abort(): void;
}

export interface RouteAndDialOptions {
  listener: ListenerKind;
  target: Socks5Target;
  /** The first decision (the SOCKS5 listener asks for it ahead of the CONNECT). */
  firstRoute: Promise<RouteDecision>;
  /** A new decision, after the first route's instance stopped answering mid-dial. */
  reroute(): Promise<RouteDecision>;
  /** Opens the instance connection for a route (or hands over one opened ahead). */
  dial(route: RouteGranted): RouteDial;
  /** The client is gone: nothing more is sent to it. */
  clientGone(): boolean;
  /** A granted route that will never be dialled (the client left first). */
  release(route: RouteGranted): void;
  accounting: ConnectionAccounting;
  /** The destination and the credential, for the supervisor's verdicts. */
  evidence: ConnectionEvidence;
  instanceDown: InstanceDownSignal | undefined;
  dialMs: number;
  log: Logger;
  /** The connection was re-routed once already (its first dial's instance went down): no second re-route. */
  rerouted?: boolean;
}

/** What routing and dialling came to; every route involved is already accounted, except a `dialed` one's close. */
export type RouteAndDialOutcome =
  | { kind: 'dialed'; connection: OpenedConnection; dialed: DialedUpstream }
  /** The client left: the route was released, or the dialled connection closed and accounted. */
  | { kind: 'client-gone' }
  | { kind: 'no-route'; reason: RouteRefusalReason; detail?: string }
  /** The dial failed (accounted with its failure); `error` gives the protocol's reply. */
  | { kind: 'dial-failed'; error: unknown }
  /** The instance stopped answering, and so did the one the re-route chose. */
  | { kind: 'instance-down' };

/**
 * The one path from a client's request to a connected instance, for both listeners: route,
 * dial (watched for the instance going down), re-route once when it does (the client has had no
 * reply yet, and the pool has moved the session), and the accounting of every route on the way.
 * Each listener only maps the outcome to its protocol's reply.
 */
export async function routeAndDial(o: RouteAndDialOptions): Promise<RouteAndDialOutcome> {
  let decision = await o.firstRoute;
  let rerouted = o.rerouted === true;
  for (;;) {
    if (o.clientGone()) {
      if (decision.ok) o.release(decision);
      return { kind: 'client-gone' };
    }
    if (!decision.ok) return { kind: 'no-route', reason: decision.reason, ...(decision.detail === undefined ? {} : { detail: decision.detail }) };
    const connection = o.accounting.opened(decision, o.evidence);
    const dial = o.dial(decision);
    const outcome = await dialWatched(o.instanceDown, decision.instance, () => dial.abort(), () => dial.promise);
    if (outcome.ok) {
      if (o.clientGone()) {
        outcome.value.socket.destroy();
        connection.closed({ bytesUp: 0, bytesDown: 0, failure: null, latencyMs: outcome.value.connectMs });
        return { kind: 'client-gone' };
      }
      return { kind: 'dialed', connection, dialed: outcome.value };
    }
    if (!outcome.instanceDown || o.clientGone()) {
      connection.closed(dialFailureReport(outcome.error, o.target, connection));
      return { kind: 'dial-failed', error: outcome.error };
    }
    connection.closed({ bytesUp: 0, bytesDown: 0, failure: INSTANCE_DOWN_FAILURE, latencyMs: outcome.elapsedMs });
    if (rerouted) return { kind: 'instance-down' };
    o.log.info('re-routing a dial away from an instance that stopped answering', { listener: o.listener, instance: decision.instance });
    rerouted = true;
    decision = await o.reroute();
  }
}

/** How a failed dial is accounted: its transport failure, or the instance's dial failure when it is not a SOCKS error. */
export function dialFailureReport(error: unknown, target: Socks5Target, connection: OpenedConnection): { bytesUp: 0; bytesDown: 0; failure: TransportFailureRecord | null; latencyMs: number } {
  // Not a SOCKS dial error cannot happen by construction; it still closes the books, as the instance's.
  if (!(error instanceof SocksDialError)) return { bytesUp: 0, bytesDown: 0, failure: { kind: 'dial', scored: true }, latencyMs: connection.elapsedMs() };
  return { bytesUp: 0, bytesDown: 0, failure: transportFailureOf(error, target), latencyMs: error.elapsedMs };
}
