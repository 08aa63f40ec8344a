import { FORWARDED_INSTANCE, type RouteParams, type RouteResult } from '../../shared/ipc/protocol.js';
import type { Logger } from '../../shared/logger.js';
import { ThrottledWarning } from '../../shared/logging/throttled-warning.js';
import type { AuditLog } from '../audit/audit-log.js';
import type { FleetSessions } from './fleet-sessions.js';

export interface FleetRoutingDeps {
  fleet: FleetSessions;
  /** Whether this node's session table holds the key (then it is served here, as on a node of its own). */
  hasSession(key: string): boolean;
  /** The pool's own routing. */
  routeHere(p: RouteParams, workerSlot: number): RouteResult | Promise<RouteResult>;
  audit: AuditLog;
  /** For the warning when an owner cannot be reached; absent: not said. */
  log?: Logger;
}

/**
 * Routing on a node of a fleet (supervisor/fleet/README.md, "Sessions"): a session named by its
 * username belongs to one node. A connection for a session this node serves, or one without a
 * name (DEFAULT_SESSION), is routed here as always; one for a session another live node owns
 * goes to that node's hop listener (the proxy worker dials it with the client's username and a
 * hop credential it signs with the grant made here); one nobody alive owns is claimed here.
 * A connection that arrived on the hop listener is served here and never forwarded again. Redis
 * is asked only for a name this node neither serves nor knows the owner of.
 */
export class FleetRouting {
  private readonly unreachableOwner: ThrottledWarning | null;

  constructor(private readonly deps: FleetRoutingDeps) {
    this.unreachableOwner = deps.log
      ? new ThrottledWarning(deps.log, 'a session’s owner cannot be reached (its hop keys are unknown here: Redis lost the fleet’s data since it started?); served on this node', { level: 'warn' })
      : null;
  }

  route(p: RouteParams, workerSlot: number): RouteResult | Promise<RouteResult> {
    // Keys DEFAULT_SESSION gives (an address's, the shared one) are each node's own.
    const key = p.listener === 'session-port' || !p.named ? null : p.key;
    if (key === null || this.deps.hasSession(key)) return this.deps.routeHere(p, workerSlot);
    if (p.listener !== 'hop') {
      const owner = this.deps.fleet.rememberedOwner(key);
      if (owner) return this.forwardTo(owner, key, p, workerSlot);
    }
    return this.claimThenRoute(p, workerSlot, key);
  }

  private async claimThenRoute(p: RouteParams, workerSlot: number, key: string): Promise<RouteResult> {
    const ownership = await this.deps.fleet.claim(key, p.listener === 'hop');
    if (ownership.kind === 'there') return this.forwardTo(ownership, key, p, workerSlot);
    if (ownership.kind === 'taken') {
      this.deps.audit.record({
        type: 'assignment',
        instance: null,
        session: key,
        message: `session taken over from node ${ownership.from}, which no longer serves it: it leaves through an exit of this node from now on`,
        details: { reason: 'owner_gone', from_node: ownership.from },
      });
    }
    return this.deps.routeHere(p, workerSlot);
  }

  private forwardTo(owner: { node: string; host: string; port: number }, key: string, p: RouteParams, workerSlot: number): RouteResult | Promise<RouteResult> {
    const hop = this.deps.fleet.hop.grant(owner.node, key);
    if (hop === null) {
      // Its keys are unknown here (it restarted while Redis had lost the fleet): nothing can open it; the session is served here meanwhile.
      this.unreachableOwner?.note({ node: owner.node });
      return this.deps.routeHere(p, workerSlot);
    }
    return {
      ok: true,
      instance: FORWARDED_INSTANCE,
      host: owner.host,
      port: owner.port,
      key,
      session: null,
      lease: false,
      exitIp: '',
      forward: { node: owner.node, hop },
    };
  }
}
