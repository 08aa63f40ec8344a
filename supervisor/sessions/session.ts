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
   * The instance the pool last moved it off for its own reasons (quarantine, drain, retirement,
   * an instance that stopped being routable), not its client's: such a session may be moved
   * again to rebalance once instances come back; after a quarantine never back onto this
   * instance, whose exit was reported burnt. Its client's rotation clears it; a rebalance keeps it.
   */
  displacedFrom?: number;
  /** The displacement was a quarantine's (an episode rebalancing must undo, see SessionTable.rebalance). */
  quarantineDisplaced?: boolean;
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
