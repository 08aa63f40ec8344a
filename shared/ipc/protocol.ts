import type { AuditEvent, AuditType } from '../api/audit-event.js';
import type { SessionParams } from '../api/session-username.js';
import type { SessionRefusalView } from '../api/route-refusal.js';
import type { ApiCredentialSnapshot, ProxyCredentialSnapshot } from '../auth/credential-snapshot.js';
import type { RateLimitDecision } from '../auth/login-rate-limiter.js';
import type { HopGrant, HopKey } from '../auth/hop-credential.js';
import type { CreatedToken, TokenRecord } from '../auth/token-record.js';
import type { TokenCreateRequest } from '../auth/token-request.js';
import type { FailureReport } from '../health/failure-kind.js';
import type {
  FailureResult,
  ExitsView,
  FleetPoolView,
  InstanceView,
  PoolRotateResult,
  PoolSummary,
  ResizeResult,
  SessionRotateResult,
  SessionView,
  StatsSample,
} from '../api/views.js';
import type { IpcEndpoint, MethodMap, NoticeMap } from './endpoint.js';

/**
 * exitpool's IPC protocol: the only place where the supervisor and the workers meet.
 * Requests are typed per direction; notices are one-way (broadcasts, accounting batches).
 */
export type WorkerRole = 'proxy' | 'api';
/** `hop`: the internal listener (HOP_PORT) where another node of the fleet forwards a session it does not own. */
export type ListenerKind = 'socks' | 'http' | 'session-port' | 'hop';

export interface RouteParams {
  /**
   * The connection's session key, decided once by the worker: the key its username names, else
   * the one DEFAULT_SESSION gives (`ip:<address>`, `shared`); null for DEFAULT_SESSION=random
   * and session ports (resolveSessionKey, shared/api/session-key.ts).
   */
  key: string | null;
  /** Whether the caller named the key in its username: only such sessions are shared between a fleet's nodes. */
  named: boolean;
  listener: ListenerKind;
  /** Session ports only: the instance the port is pinned to. */
  instance?: number;
  /** What the username asked for (shared/api/session-username.ts); absent for a plain key. */
  params?: SessionParams;
}

/** Why a route is refused; the listeners map each to their protocol's reply. */
export type RouteRefusal =
  | 'no_routable_instance'
  | 'session_limit'
  /** The username asked for countries no usable exit is in (none in the catalog, or all banned). */
  | 'no_exit_in_country'
  /** An instance was being given an exit there and did not serve through it within COUNTRY_EXIT_WAIT_MS. */
  | 'country_wait_timeout';

export type RouteResult =
  /**
   * path: the instance's Unix-socket SocksPort, which the worker dials (host and port then name
   * its unused TCP fallback); without it, host:port is a TCP SocksPort (DATA_DIR too deep for a socket path).
   */
  | {
      ok: true;
      instance: number;
      host: string;
      port: number;
      path?: string;
      key: string | null;
      /** The session's incarnation (a key deleted and used again is a new session); null without a key. */
      session: number | null;
      /**
       * The worker may keep this route for the key and use it for the key's next connections
       * without asking, until a `routes.invalidate` drops it (docs/architecture.md, "Route leases").
       */
      lease: boolean;
      /** The exit IP the instance last knew ('' while unknown): EXIT_HEADER names it to HTTP proxy clients. */
      exitIp: string;
      /**
       * The session is another node's (supervisor/fleet): host:port is that node's hop listener,
       * to be dialled with the client's username and a password the worker signs with `hop`
       * (shared/auth/hop-credential.ts) for the connection's credential; `instance` is
       * FORWARDED_INSTANCE and nothing is leased.
       */
      forward?: { node: string; hop: HopGrant };
    }
  | { ok: false; reason: RouteRefusal; detail?: string };

/**
 * A connection a worker routed with a lease, without asking: the supervisor counts it on the
 * session as route() would have (active, last seen). Ignored when `session` is no longer the
 * key's incarnation (deleted or expired meanwhile).
 */
export interface OpenedRoute {
  key: string;
  session: number;
  instance: number;
}

/** What a proxy worker must forget of its route leases: these keys, and every lease on these instances. */
export interface RouteInvalidation {
  keys: string[];
  instances: number[];
}

/** How a transport-level failure is classified by the proxy worker. */
export interface TransportFailureRecord {
  kind: 'dial' | 'reset' | 'timeout' | 'socks_refused';
  socksReply?: number;
  /** false for destinations the network refuses without blaming the exit (private, loopback). */
  scored: boolean;
  /**
   * `host:port` of the destination, when the failure was about reaching it (tor refused the
   * CONNECT, or the deadline passed while tor was working on it): the supervisor classifies the
   * failure and checks the destination through another exit before blaming this one
   * (supervisor/verdicts/failure-classes.ts).
   */
  destination?: string;
}

/** A dial through one instance to a destination, on the supervisor's behalf (DestinationBlame). */
export interface DestinationProbe {
  socks: { host: string; port: number; path?: string };
  host: string;
  port: number;
}

/** ok: tor connected; else tor's SOCKS reply (null when there was none: the dial itself failed). */
export interface DestinationProbeResult {
  ok: boolean;
  socksReply: number | null;
}

/** A GET through one instance on the supervisor's behalf: an exit's egress probe, or the exit list (supervisor/exits). */
export interface EgressFetch {
  socks: { host: string; port: number; path?: string };
  /** http: or https: (the certificate is checked against Node's CAs); the host is resolved by the exit. */
  url: string;
  /** For the whole fetch: the dial through tor, TLS, the answer. */
  timeoutMs: number;
  /** A longer body fails the fetch (`too_large`). */
  maxBytes: number;
}

/**
 * Why a fetch through an instance failed: `url` (not one it can fetch), `dial` (the instance's
 * SocksPort did not answer: the tor process, not the exit), `socks` (tor refused the CONNECT:
 * `socksReply`), `timeout`, `tls`, `http` (a status other than 2xx: `status`), `too_large`,
 * `broken` (the connection ended before the answer did).
 */
export type EgressFetchFailure = 'url' | 'dial' | 'socks' | 'timeout' | 'tls' | 'http' | 'too_large' | 'broken';

export type EgressFetchResult =
  | { ok: true; status: number; body: string }
  | { ok: false; failure: EgressFetchFailure; socksReply: number | null; status: number | null; detail: string };

/** Who sent a failure report: one identity per credential (an address only under AUTH_DISABLED). */
export type FailureReporter = { kind: 'token'; id: string } | { kind: 'sign-in'; user: string } | { kind: 'address'; ip: string };

/**
 * A session's connection that started towards a host through an instance: what makes a report
 * naming that site credible (supervisor/verdicts/visit-log.ts). Sent when the dial starts, not
 * when it ends: a client reads a captcha and reports it while its tunnel is still open.
 */
export interface ReachedHost {
  key: string;
  instance: number;
  /** The destination host the client named (a name or an IP literal, no port). */
  host: string;
  /** As CloseRecord.credential. */
  credential: string;
  /** Date.now() of the worker when the dial started. */
  at: number;
}

/** One finished connection (SOCKS) or request (HTTP), sent in batches. */
export interface CloseRecord {
  key: string | null;
  /** The incarnation of the session `key` named when the connection was routed (RouteResult.session). */
  session: number | null;
  instance: number;
  bytesUp: number;
  bytesDown: number;
  ok: boolean;
  failure?: TransportFailureRecord;
  /** Time from routing to the instance's SOCKS success, ms; null when the dial failed. */
  latencyMs: number | null;
  /**
   * When the connection ended (Date.now() of the worker; same host, same clock). Records reach
   * the supervisor a batch later than a client's failure report about the same request: health
   * orders them by this, not by arrival.
   */
  endedAt: number;
  /** The destination host the client named (a name or an IP literal, no port): which sites a session reached through which exit. */
  host: string;
  /**
   * The credential that opened the connection: `token:<id>`, `address:<ip>` (AUTH_DISABLED) or
   * `session-port`; a connection another node forwarded carries its client's, signed in its hop
   * credential. Evidence is weighed per credential.
   */
  credential: string;
}

/**
 * A SOCKS5 route that was granted (routing starts before the client's CONNECT arrives) but never
 * used: the client left or was refused first. It undoes the route's live-connection count and is
 * not a request.
 */
export interface ReleasedRoute {
  key: string | null;
  session: number | null;
  instance: number;
}

export type InstanceAction = 'rotate' | 'restart' | 'quarantine' | 'release' | 'drain';

/**
 * Requests a worker sends to the supervisor. A refusal is thrown, not returned: an
 * ExitpoolError whose catalogue code (shared/errors) reaches the worker as IpcRemoteError.code.
 * Parameters are typed values: request bodies are parsed in the API worker, before IPC.
 */
export interface WorkerRequests extends MethodMap {
  ping: { params: { sentAt: number }; result: { receivedAt: number } };
  /** GET /health: routable instances, and proxy workers whose listeners are up. */
  'health.get': { params: null; result: { routable: number; proxyWorkersListening: number } };
  route: { params: RouteParams; result: RouteResult };
  'pool.summary': { params: null; result: PoolSummary };
  'pool.resize': { params: { size: number }; result: ResizeResult };
  'pool.rotate': { params: null; result: PoolRotateResult };
  'instances.list': { params: null; result: InstanceView[] };
  'instances.get': { params: { id: number }; result: InstanceView };
  'instances.action': { params: { id: number; action: InstanceAction; wipe?: boolean }; result: InstanceView };
  'sessions.list': { params: null; result: SessionView[] };
  'sessions.get': { params: { key: string }; result: SessionView };
  'sessions.rotate': { params: { key: string; newnym: boolean }; result: SessionRotateResult };
  /** reporter: the credential behind the report, which CLIENT_REPORT_BUDGET is counted against. */
  'sessions.failure': { params: { key: string; report: FailureReport; reporter: FailureReporter }; result: FailureResult };
  'sessions.delete': { params: { key: string }; result: null };
  /** The key's last route refusal within RECENT_REFUSAL_TTL_MS, for a client whose library hid it (null refusal: none). */
  'sessions.refusal': { params: { key: string }; result: SessionRefusalView };
  /** On a node of a fleet: the other live node that owns a session this node does not hold, and its API (host:port); null otherwise. */
  'sessions.owner': { params: { key: string }; result: { node: string; api: string } | null };
  /** types: only these audit types (all when absent). */
  'exits.list': { params: null; result: ExitsView };
  'fleet.view': { params: null; result: FleetPoolView };
  'exits.unban': { params: { fingerprint: string }; result: null };
  'events.recent': { params: { limit: number; types?: AuditType[] }; result: AuditEvent[] };
  'stats.history': { params: { range: 'fine' | 'long' }; result: StatsSample[] };
  'metrics.text': { params: null; result: { contentType: string; text: string } };
  /** At start, before listening: a proxy worker's credential snapshot. */
  'credentials.proxy': { params: null; result: ProxyCredentialSnapshot };
  /** At start, before listening: the API worker's credential snapshot (the proxy one and more). */
  'credentials.api': { params: null; result: ApiCredentialSnapshot };
  /** At start, before listening (proxy workers): this node's hop keys; null off a fleet. */
  'hop.keys': { params: null; result: HopKeySnapshot | null };
  'tokens.list': { params: null; result: TokenRecord[] };
  'tokens.create': { params: { request: TokenCreateRequest }; result: CreatedToken };
  'tokens.delete': { params: { id: string }; result: null };
  /** API worker, per sign-in attempt: count it in its bucket (shared/auth/sign-in-limit.ts) or refuse it. */
  'signin.attempt': { params: { bucket: string }; result: RateLimitDecision };
}

/** Requests the supervisor sends to a worker. */
export interface SupervisorRequests extends MethodMap {
  ping: { params: { sentAt: number }; result: { receivedAt: number } };
  /** A new credential snapshot; answered once the worker verifies with it (revocation is immediate). */
  'credentials.update.proxy': { params: ProxyCredentialSnapshot; result: { version: number } };
  'credentials.update.api': { params: ApiCredentialSnapshot; result: { version: number } };
  /** Proxy workers: this node's hop keys after a rotation; answered once the worker checks with them. */
  'hop.keys.update': { params: HopKeySnapshot; result: { version: number } };
  /** Proxy workers: drop route leases; answered once dropped, so the change is in force before the API answers. */
  'routes.invalidate': { params: RouteInvalidation; result: { dropped: number } };
  /**
   * Proxy workers: send the accounting batch now (its notice arrives before this answer), so
   * that what the supervisor reads next counts every connection opened so far.
   */
  'accounting.flush': { params: null; result: null };
  /** Proxy workers: dial a destination through an instance and hang up (the supervisor judges who failed). */
  'destination.probe': { params: DestinationProbe; result: DestinationProbeResult };
  /** Proxy workers: GET a URL through an instance (an exit's egress probe, the exit list); answered within the fetch's own timeout. */
  'egress.fetch': { params: EgressFetch; result: EgressFetchResult };
}

/**
 * Deadlines of the requests that may take longer than DEFAULT_IPC_TIMEOUT_MS, beside the
 * methods they belong to; IpcEndpoint.request uses them unless a call names its own.
 */
export const WORKER_REQUEST_TIMEOUTS_MS: { readonly [M in keyof WorkerRequests]?: number } = {
  /** A rotate waits for the sessions to move; a restart never waits for a bootstrap. */
  'instances.action': 30_000,
  'sessions.rotate': 15_000,
  /** The whole table (MAX_SESSIONS) is serialised. */
  'sessions.list': 10_000,
  /** Both wait for every worker's acknowledgement (CREDENTIAL_PUSH_TIMEOUT_MS) and the auth.json write. */
  'tokens.create': 10_000,
  'tokens.delete': 10_000,
  /** At start, while the supervisor is still busy starting tor processes. */
  'credentials.proxy': 10_000,
  'credentials.api': 10_000,
};

/** What a proxy worker checks hop credentials with (supervisor/fleet/fleet-hop-keys.ts): its node's name and keys, newest first. */
export interface HopKeySnapshot {
  version: number;
  node: string;
  keys: HopKey[];
}

/** The live-stream snapshot pushed to the API worker about every second. */
export interface StateSnapshot {
  pool: PoolSummary;
  instances: InstanceView[];
  stats: StatsSample | null;
}

/** Notices from a worker. */
export interface WorkerNotices extends NoticeMap {
  /** The worker's listeners are up (or, for a worker without listeners, it is initialised). */
  ready: { role: WorkerRole; pid: number };
  /** Finished connections since the last batch (proxy workers, every ACCOUNTING_FLUSH_MS). */
  accounting: {
    /** Connections routed with a lease since the last batch (the supervisor asks for them before it reads sessions). */
    opened: OpenedRoute[];
    /** Sessions' connections that started towards a host since the last batch. */
    reached: ReachedHost[];
    closes: CloseRecord[];
    released: ReleasedRoute[];
    routeRttMs: number[];
    /** Connections refused over MAX_CONNECTIONS_PER_WORKER since the last batch. */
    refused: number;
    /** Unauthenticated connections closed to make room (MAX_UNAUTHENTICATED_PER_WORKER) since the last batch. */
    evicted: number;
    /** Client connections the worker holds now (sent when it changed, with any batch). */
    connections: number;
  };
  /** A listener could not be opened at start (port in use, BIND_HOST unusable); the worker exits next. */
  'start-failed': { setting: string; message: string };
  /** API worker: a successful sign-in, for the audit log (failures are logged, never audited). */
  'signed-in': { user: string; address: string };
  /** API worker: the attempt counted in `bucket` had the right password; its failures are forgiven. */
  'signin.succeeded': { bucket: string };
}

/** Notices from the supervisor (sent to one worker, or to all as a broadcast). */
export interface SupervisorNotices extends NoticeMap {
  /** Stop accepting, finish or drop what is in flight within graceMs, then exit 0. */
  shutdown: { graceMs: number };
  /** API worker: the periodic snapshot for the live stream. */
  state: StateSnapshot;
  /** API worker: one audit event as it happens. */
  event: AuditEvent;
  /** Proxy workers: session ports to open or close (instance ids present in the pool). */
  'session-ports': { instances: number[] };
  /** Proxy workers: this instance stopped answering; re-route dials still waiting on it. */
  'instance-down': { instance: number };
}

export type SupervisorEndpoint = IpcEndpoint<SupervisorRequests, WorkerRequests, SupervisorNotices, WorkerNotices>;
export type WorkerEndpoint = IpcEndpoint<WorkerRequests, SupervisorRequests, WorkerNotices, SupervisorNotices>;

/** The `instance` of a route to another node (a forwarded session): no instance of this node carries it. */
export const FORWARDED_INSTANCE = -1;

/** Environment variables through which the supervisor tells a forked worker what it is. */
/** This node's NODE_NAME, set only on a node of a fleet: the proxy workers open the hop listener, the API worker passes on requests about other nodes' sessions. */
export const FLEET_NODE_ENV = 'EXITPOOL_FLEET_NODE';

export const ROLE_ENV = 'EXITPOOL_PROCESS_ROLE';
export const SLOT_ENV = 'EXITPOOL_WORKER_SLOT';
/** How often a proxy worker sends its batch of finished connections. */
export const ACCOUNTING_FLUSH_MS = 250;
