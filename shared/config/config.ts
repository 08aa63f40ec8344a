import path from 'node:path';
import type { StateStoreSetting } from './values.js';
import type { LogLevel } from '../logger.js';
import { PORTS_PER_INSTANCE } from './limits.js';
import type { RateLimit, RoutableFloor } from './values.js';

export type DefaultSessionMode = 'ip' | 'random' | 'shared';
export const DEFAULT_SESSION_MODES: readonly DefaultSessionMode[] = ['ip', 'random', 'shared'];

/** The effective configuration, parsed once in the supervisor and handed to every worker. */
export interface Config {
  poolSize: number;
  minReady: number;
  defaultSession: DefaultSessionMode;
  sessionTtlMs: number;
  maxSessions: number;
  quarantineFailures: number;
  quarantineConsecutive: number;
  minRoutable: RoutableFloor;
  clientReportBudget: RateLimit;
  /** Independent reporters whose reports ban an exit for everyone, within banReportWindowMs. */
  banReporters: number;
  banReportWindowMs: number;
  /** Bans one credential's reports may bring about per window. */
  clientBanBudget: RateLimit;
  /** Floors of eligible exits below which client evidence never bans. */
  minEligibleExits: RoutableFloor;
  minEligibleExitsPerCountry: number;
  /** Bans per hour above which the pool says so (audit, metric). */
  banRateAlert: number;
  failureWindowMs: number;
  pinExitRelay: boolean;
  /** What two instances' exits must not share: relay, subnet (/24, /48) or family. */
  exitDistinct: 'relay' | 'subnet' | 'family';
  /** Exits a session remembers; a rotation avoids them and their /24s. */
  exitHistory: number;
  /** Instances beyond POOL_SIZE held for session rotations (supervisor/pool/spare-supply.ts); only with PIN_EXIT_RELAY. */
  warmSpares: number;
  exitBanTtlMs: number;
  /** IP-echo URLs an exit's egress address is measured with (tried in order); empty: no probe. */
  egressProbeUrls: string[];
  /** A measured egress address is measured again after this long (when its exit is pinned or stays pinned). */
  egressProbeTtlMs: number;
  /** One probe's whole time (every URL): a bootstrapping instance waits for its egress at most this long. */
  egressProbeTimeoutMs: number;
  /** A Tor exit list (bulk exit-addresses format): an http(s) URL, an absolute file path, or '' for none. */
  exitList: string;
  /** The HTTP proxy adds `Exitpool-Exit: <exit IP>` to its responses. */
  exitHeader: boolean;
  /** Session parameters in the proxy username (country, lifetime, mode); off: the username is the raw key. */
  usernameParams: boolean;
  /** The longest idle lifetime a username may ask for (sesstime-, ttl-). */
  sessionTtlMaxMs: number;
  torMaxCircuitDirtinessMs: number;
  torConflux: boolean;
  torExitNodes: string[];
  torStrictNodes: boolean;
  torBinary: string;
  torExtraConfig: string[];
  authDisabled: boolean;
  drainOnRotate: boolean;
  adminUser: string;
  adminPassword: string | null;
  proxyToken: string | null;
  signingSecret: string | null;
  loginTtlMs: number;
  loginRateLimit: RateLimit;
  sessionPortBase: number | null;
  socksPort: number;
  httpPort: number;
  apiPort: number;
  bindHost: string;
  apiAllowedHosts: string[];
  instancePortBase: number;
  dataDir: string;
  /** Where the durable state lives: `sqlite` (DATA_DIR/state.db), a Redis URL, or `none` (every start is a clean slate). */
  stateStore: StateStoreSetting;
  /** This node's name among the nodes of one pool on a shared Redis (supervisor/fleet). */
  nodeName: string;
  /** How long a node's lease (and each of its exit leases) outlives its last renewal. */
  nodeLeaseMs: number;
  /** Where the other nodes reach this node's hop listener ('' = BIND_HOST, or the host name when BIND_HOST is a wildcard). */
  nodeAddress: string;
  /** The internal listener for connections other nodes forward (supervisor/fleet, "Hop credentials"); open only on a node of a fleet. */
  hopPort: number;
  /** The lost fleet epoch to re-seed from this node's knowledge at start ('' = none). */
  fleetReseed: string;
  logLevel: LogLevel;
  logFormat: 'text' | 'json';
  bootstrapStallTimeoutMs: number;
  spawnStaggerMs: number;
  proxyWorkers: number;
  /** PROXY_WARM_UP: connections a proxy worker sends through its own path before it listens (0: none). */
  proxyWarmUp: number;
  maxConnectionsPerWorker: number;
  maxUnauthenticatedPerWorker: number;
  shutdownGraceMs: number;
  remediationBackoffBaseMs: number;
  remediationBackoffMaxMs: number;
  remediationRecurrenceWindowMs: number;
  rotationGraceMs: number;
}

export { MAX_POOL_SIZE, MAX_WARM_SPARES, PORTS_PER_INSTANCE } from './limits.js';
export { CORES_PER_PROXY_WORKER, defaultProxyWorkers, proxyWorkersFor } from './proxy-workers.js';

export function instanceSocksPort(config: Pick<Config, 'instancePortBase'>, index: number): number {
  return config.instancePortBase + index * PORTS_PER_INSTANCE;
}

export function instanceControlPort(config: Pick<Config, 'instancePortBase'>, index: number): number {
  return config.instancePortBase + index * PORTS_PER_INSTANCE + 1;
}

export function sessionPort(config: Pick<Config, 'sessionPortBase'>, index: number): number | null {
  return config.sessionPortBase === null ? null : config.sessionPortBase + index;
}

export function resolveDataDir(raw: string): string {
  return path.resolve(raw);
}
