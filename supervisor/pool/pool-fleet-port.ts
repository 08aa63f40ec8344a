import type { InstanceView } from '../../shared/api/views.js';
import type { AuditLog } from '../audit/audit-log.js';
import type { FleetNodeSummary, FleetPoolPort } from '../fleet/fleet-pool-port.js';
import type { SessionTable } from '../sessions/session-table.js';

export interface PoolFleetPortDeps {
  sessions: SessionTable;
  audit: AuditLog;
  routableCount(): number;
  instanceViews(): InstanceView[];
}

/** The pool as a node of a fleet sees it (supervisor/fleet/fleet-pool-port.ts): what the fleet asks of this node's sessions. */
export class PoolFleetPort implements FleetPoolPort {
  constructor(private readonly deps: PoolFleetPortDeps) {}

  /** Keys of the sessions used since `since` or with a connection open: on a fleet, their ownership is renewed. */
  sessionKeysUsedSince(since: number): string[] {
    const keys: string[] = [];
    for (const s of this.deps.sessions.all()) if (s.lastSeen >= since || s.active > 0) keys.push(s.key);
    return keys;
  }

  /**
   * Sessions another node of the fleet owns, which this node served too while the two could not
   * reach Redis: removed here (audited), so that their next connections go to the owner.
   */
  giveUpSessions(sessions: readonly { key: string; owner: string }[]): void {
    for (const { key, owner } of sessions) {
      if (!this.deps.sessions.delete(key)) continue;
      this.deps.audit.record({
        type: 'assignment',
        instance: null,
        session: key,
        message: `session given up: node ${owner} owns it, and its next connections go there`,
        details: { reason: 'owned_elsewhere', owner_node: owner },
      });
    }
  }

  holdsSession(key: string): boolean {
    return this.deps.sessions.get(key) !== undefined;
  }

  /** What this node publishes of itself to the fleet (GET /api/fleet on any node). */
  nodeSummary(): FleetNodeSummary {
    return {
      routable: this.deps.routableCount(),
      sessions: this.deps.sessions.size,
      instances: this.deps.instanceViews().map((i) => ({
        id: i.id,
        ready: i.ready,
        state: i.health.state,
        exit_ip: i.exit_ip,
        exit_country: i.exit_country,
        exit_fingerprint: i.assigned_exit?.fingerprint ?? '',
        exit_shortage: i.exit_shortage,
        sessions: i.sessions,
        requests: i.totals.requests,
      })),
    };
  }
}
