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
}

/** The API shape of a session (SPEC "Session"). */
export interface SessionView {
  key: string;
  instance: number;
  created_at: string;
  last_seen: string;
  requests: number;
  failures: number;
  bytes_up: number;
  bytes_down: number;
  active: number;
  session_port?: number;
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
