import type { ExitAddressSource, ExitAssignmentView, InstanceView, PoolSummary } from '../../shared/api/views.js';
import { formatDuration, type Config } from '../../shared/config/index.js';
import { serviceVersion } from '../../shared/version.js';
import type { PoolEntry } from './pool-entry.js';
import type { ExitState } from './pool-instance.js';

/**
 * The API's views of the pool, built from its state without touching it: the one place where
 * the pool's words (ExitState, PoolEntry, Config) become the wire's (shared/api/views.ts).
 */

/** The exit as the API shows it: a retired IP only while no new exit is known, confirmed only with an IP. */
export function exitFieldsOf(x: ExitState): Pick<InstanceView, 'exit_ip' | 'exit_country' | 'exit_nickname' | 'retired_exit_ip' | 'exit_confirmed' | 'pinned_exit'> {
  return {
    exit_ip: x.exitIp,
    exit_country: x.exitCountry,
    exit_nickname: x.exitNickname,
    retired_exit_ip: x.exitIp === '' ? x.retiredExitIp : '',
    exit_confirmed: x.exitIp !== '' && x.exitConfirmed,
    pinned_exit: x.pinnedExit,
  };
}

/**
 * How the exit's address was found (supervisor/exits, "What sites see"): exit_ip is the address
 * sites see (`ExitState.exitIp` is already the measured one); the relay's published address, the
 * source and the time come from the exit catalog. Unknown to the catalog (PIN_EXIT_RELAY off, or
 * not in the consensus read), exit_ip is the published address.
 */
export interface ExitAddressOrigin {
  published: string;
  source: ExitAddressSource;
  measuredAt: number | null;
}

export function exitAddressFieldsOf(x: ExitState, origin: ExitAddressOrigin | undefined): Pick<InstanceView, 'published_exit_ip' | 'exit_ip_source' | 'exit_ip_measured_at'> {
  if (x.exitIp === '') return { published_exit_ip: '', exit_ip_source: '', exit_ip_measured_at: null };
  if (!origin) return { published_exit_ip: x.exitIp, exit_ip_source: 'published', exit_ip_measured_at: null };
  return { published_exit_ip: origin.published, exit_ip_source: origin.source, exit_ip_measured_at: origin.measuredAt === null ? null : new Date(origin.measuredAt).toISOString() };
}

export function instanceViewOf(e: PoolEntry, sessionsOn: number, assigned: ExitAssignmentView | null = null, shortage = '', origin?: (fingerprint: string) => ExitAddressOrigin | undefined): InstanceView {
  const i = e.instance;
  const exit = i.exit();
  return {
    id: i.id,
    ready: i.ready(),
    running: i.running(),
    bootstrap: i.bootstrap(),
    pid: i.pid() ?? 0,
    uptime_secs: i.uptimeSecs(),
    sessions: sessionsOn,
    socks_addr: i.socksPath !== null ? `unix:${i.socksPath}` : `${i.socksHost}:${i.socksPort}`,
    ...exitFieldsOf(exit),
    ...exitAddressFieldsOf(exit, exit.exitFingerprint === '' ? undefined : origin?.(exit.exitFingerprint)),
    health: e.health.view(),
    totals: {
      requests: e.requests,
      failures: e.failures,
      bytes_up: e.bytesUp,
      bytes_down: e.bytesDown,
      latency_ms: Math.round(e.latencyMs * 10) / 10,
    },
    draining: e.draining,
    spare: e.spare,
    rotating: i.rotating(),
    responsive: i.responsive(),
    assigned_exit: assigned,
    exit_shortage: shortage,
  };
}

export interface PoolCounts {
  /** The pool's instances (spares apart), ready and routable ones among them. */
  size: number;
  targetSize: number;
  ready: number;
  routable: number;
  sessions: number;
  totals: { requests: number; failures: number; bytesUp: number; bytesDown: number };
  spares: { size: number; ready: number; warm: number; inUse: number };
  /** WARM_SPARES in force (0 without exit assignments). */
  spareTarget: number;
}

export function poolSummaryOf(c: Config, n: PoolCounts): PoolSummary {
  return {
    version: serviceVersion(),
    size: n.size,
    ready: n.ready,
    routable: n.routable,
    sessions: n.sessions,
    spares: { size: n.spares.size, ready: n.spares.ready, warm: n.spares.warm, in_use: n.spares.inUse },
    totals: {
      requests: n.totals.requests,
      failures: n.totals.failures,
      bytes_up: n.totals.bytesUp,
      bytes_down: n.totals.bytesDown,
    },
    socks_port: c.socksPort,
    http_port: c.httpPort,
    config: {
      pool_size: n.targetSize,
      warm_spares: n.spareTarget,
      session_ttl: formatDuration(c.sessionTtlMs),
      default_session: c.defaultSession,
      min_ready: c.minReady,
      max_sessions: c.maxSessions,
      pin_exit_relay: c.pinExitRelay,
      drain_on_rotate: c.drainOnRotate,
      auth_disabled: c.authDisabled,
      quarantine_failures: c.quarantineFailures,
      quarantine_consecutive: c.quarantineConsecutive,
      failure_window: formatDuration(c.failureWindowMs),
      session_port_base: c.sessionPortBase,
    },
  };
}
