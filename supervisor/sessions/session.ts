import type { SessionParams } from '../../shared/api/session-username.js';
import type { SessionView } from '../../shared/api/views.js';

/** One pinned session: a key, the instance serving it, and its counters. */
export interface Session {
  readonly key: string;
  /** This incarnation of the key (a deleted or expired key used again is a new session). */
  readonly id: number;
  instance: number;
  readonly createdAt: number;
  lastSeen: number;
  requests: number;
  failures: number;
  bytesUp: number;
  bytesDown: number;
  /** Connections currently attached (exact: incremented when routed, decremented on close). */
  active: number;
  /**
   * Set when the pool last moved it for its own reasons (quarantine, drain, retirement, an
   * instance that stopped being routable), not its client's: such a session may be moved again
   * to rebalance once instances come back. `from` is the instance it was moved off; after a
   * quarantine (`burnt`) it never goes back there, since that exit was reported burnt. Its
   * client's rotation clears it; a rebalance keeps it.
   */
  displaced?: { from: number; burnt: boolean };
  /** Exit IPs it was moved away from, newest last (at most EXIT_HISTORY): rotations avoid them. */
  recentExits: string[];
  /** Sites its failure reports named, newest last (a few): its rotations avoid exits banned for them. */
  domains: string[];
  /** What its username asked for (country, lifetime, mode); absent: the service's defaults. The latest username with parameters wins. */
  params?: SessionParams;
}

/** Its exit, as the instance serving it knows it. */
export interface SessionExit {
  exitIp: string;
  exitCountry: string;
}

export function viewOf(s: Session, exit: SessionExit = { exitIp: '', exitCountry: '' }): SessionView {
  return {
    key: s.key,
    instance: s.instance,
    created_at: new Date(s.createdAt).toISOString(),
    last_seen: new Date(s.lastSeen).toISOString(),
    requests: s.requests,
    failures: s.failures,
    bytes_up: s.bytesUp,
    bytes_down: s.bytesDown,
    active: s.active,
    exit_ip: exit.exitIp,
    exit_country: exit.exitCountry,
    recent_exits: [...s.recentExits],
    params: {
      countries: [...(s.params?.countries ?? [])],
      lifetime_secs: s.params?.lifetimeMs === undefined ? null : Math.round(s.params.lifetimeMs / 1000),
      mode: s.params?.mode ?? 'sticky',
    },
  };
}
