import type { SessionView } from '../../shared/api/views.js';

/** One pinned session: a key, the instance serving it, and its counters. */
export interface Session {
  readonly key: string;
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
   * Moved off its instance by the pool (quarantine, drain, retirement, an instance that stopped
   * being routable), not by its client: such a session may be moved again to rebalance once
   * instances come back. A rotation or a rebalance clears it.
   */
  displaced?: boolean;
}

export function viewOf(s: Session): SessionView {
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
  };
}
