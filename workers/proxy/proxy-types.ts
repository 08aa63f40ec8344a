/**
 * The seam between the proxy transport (this directory) and whatever decides routing and
 * verifies credentials. Nothing here knows about IPC or the supervisor: production wires these
 * interfaces to IPC, tests wire them to fakes.
 */
import type { ThrottledWarning } from '../../shared/logging/throttled-warning.js';
import type { ListenerKind, RouteRefusal, RouteResult, TransportFailureRecord } from '../../shared/ipc/protocol.js';
import type { ConnectionBudget } from './connection-budget.js';
import type { InstanceDownSignal } from './instance-down.js';

export type { ListenerKind };

/** The question the pool answers once per SOCKS connection and once per HTTP request. */
export interface RouteRequest {
  /** SOCKS5 username or the user part of Proxy-Authorization; null when none was sent. */
  sessionKey: string | null;
  /**
   * Client address, IPv4-mapped IPv6 already unwrapped (for DEFAULT_SESSION=ip). The listeners
   * make it a getter (routeRequestFrom: a getpeername system call on first read), so read it
   * only when needed.
   */
  clientIp: string;
  listener: ListenerKind;
  /** Set only for session ports: the instance the port is pinned to. */
  instanceId?: number;
}

/** The supervisor's refusals, the worker's own when the supervisor cannot be asked, and a username whose session parameters are malformed. */
export type RouteRefusalReason = RouteRefusal | 'supervisor_unavailable' | 'bad_session_params';

/**
 * A route the supervisor granted, as the IPC protocol carries it (shared/ipc/protocol.ts): the
 * instance's SOCKS endpoint, the session key and incarnation, the lease, the exit it knew, and
 * for another node's session the hop to make (dialled with the client's own username).
 */
export type RouteGranted = Extract<RouteResult, { ok: true }>;

export interface RouteRefused {
  ok: false;
  reason: RouteRefusalReason;
  /** Said to the client (Proxy-Status details, the response body) and in the log. */
  detail?: string;
}

export type RouteDecision = RouteGranted | RouteRefused;

export interface Router {
  /**
   * Must settle: the production implementation times out on its own and answers
   * `supervisor_unavailable`. A rejection is treated the same way.
   */
  route(request: RouteRequest): Promise<RouteDecision>;
  /**
   * The decision when the router holds it already (a lease: the connection counts as routed),
   * without waiting; undefined when route() must be asked. Optional: a listener that gets a
   * decision here dials in the same event-loop turn, with no promise in between.
   */
  routeKnown?(request: RouteRequest): RouteDecision | undefined;
}

/**
 * A proxy credential's check; a credential that passes is named by its `credential` id
 * (`token:<id>`), which the connection's accounting carries to the supervisor (evidence is
 * weighed per credential: supervisor/verdicts).
 */
export type CredentialCheck = (username: string | null, password: string | null) => { ok: true; credential: string } | { ok: false };

export interface CredentialPolicy {
  /**
   * false under AUTH_DISABLED: no credential is needed and `check` is never called, but a
   * username that is sent is still used as the session key.
   */
  required: boolean;
  check: CredentialCheck;
}

export interface ConnectionStats {
  /** Payload bytes sent to the instance after its SOCKS handshake (request heads and bodies included for HTTP). */
  bytesUp: number;
  /** Payload bytes received from the instance after its SOCKS handshake. */
  bytesDown: number;
  /** true exactly when `failure` is absent. A client that gives up or resets is not a failure of the instance. */
  ok: boolean;
  failure?: TransportFailureRecord;
  /** Time from starting the dial to tor's CONNECT answer (success or refusal); the instance's circuit latency. */
  latencyMs: number;
  /** Time from the route decision to the end of the connection or request. */
  durationMs: number;
  /** When the exchange finished (Date.now()), if earlier than the report of the close (a tunnel's first side to end). */
  endedAt?: number;
  /** Who asked and where to (ConnectionEvidence). */
  evidence: ConnectionEvidence;
}

/**
 * What a connection tells the supervisor's verdicts about itself: the destination host the
 * client named (a name or an IP literal, without the port), and the credential that opened it
 * (`token:<id>`; `address:<ip>` under AUTH_DISABLED; `session-port` on a session port; on the
 * hop listener, the client's credential the forwarding node signed into its hop credential). The
 * address is read when the connection ends (a getpeername call) only where it names the credential.
 */
export interface ConnectionEvidence {
  host: string;
  credential: () => string;
}

/**
 * Accounting hooks. Called synchronously on the hot path, so implementations must be cheap
 * (the worker batches them into IPC). Every granted route ends in exactly one of two ways:
 * `connectionOpened` followed by exactly one `connectionClosed` with the same route object, or
 * `connectionReleased` when the client left (or was refused) between being routed and the
 * dial (a SOCKS5 client before its CONNECT, an HTTP client during the route request): the route
 * was never used, so it is not a request.
 */
export interface ProxyEvents {
  connectionOpened(route: RouteGranted, listener: ListenerKind, evidence: ConnectionEvidence): void;
  connectionClosed(route: RouteGranted, listener: ListenerKind, stats: ConnectionStats): void;
  connectionReleased(route: RouteGranted, listener: ListenerKind): void;
}

/** The injected dependencies shared by every listener. */
export interface ProxyDependencies {
  router: Router;
  credentials: CredentialPolicy;
  events: ProxyEvents;
  /** The worker's "credential refused" warning, shared by its listeners; absent: one per listener. */
  credentialRefusals?: ThrottledWarning;
  /** The worker's connection budget, shared by its listeners; absent: unbounded. */
  budget?: ConnectionBudget;
  /** Reports of instances that stopped answering; a dial waiting on one is re-routed once. Absent: dials wait for their deadline. */
  instanceDown?: InstanceDownSignal;
  /** EXIT_HEADER: the HTTP proxy names the session's exit in `Exitpool-Exit` on its responses. */
  exitHeader?: boolean;
}
