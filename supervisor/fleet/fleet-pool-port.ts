import type { FleetNodeView } from '../../shared/api/views.js';

/** What a node publishes of itself for GET /api/fleet on any node. */
export type FleetNodeSummary = Omit<FleetNodeView, 'node' | 'updated_at'>;

/**
 * What the fleet needs of this node's pool. Defined here and implemented by the pool
 * (supervisor/pool/pool-fleet-port.ts), so that the fleet never imports the pool.
 */
export interface FleetPoolPort {
  /** Keys of the sessions used since `since` or with a connection open: their ownership is renewed. */
  sessionKeysUsedSince(since: number): string[];
  /** Sessions another node owns, which this node served too while Redis was away: given up here. */
  giveUpSessions(sessions: readonly { key: string; owner: string }[]): void;
  /** Whether this node's table holds the session now. */
  holdsSession(key: string): boolean;
  nodeSummary(): FleetNodeSummary;
}
