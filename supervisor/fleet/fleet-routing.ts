import { FORWARDED_INSTANCE, type RouteParams, type RouteResult } from '../../shared/ipc/protocol.js';
import type { AuditLog } from '../audit/audit-log.js';
import type { FleetSessions } from './fleet-sessions.js';

export interface FleetRoutingDeps {
  fleet: FleetSessions;
  /** Whether this node's session table holds the key (then it is served here, as on a node of its own). */
  hasSession(key: string): boolean;
  /** The pool's own routing. */
  routeHere(p: RouteParams, workerSlot: number): RouteResult | Promise<RouteResult>;
  audit: AuditLog;
}

/**
 * Routing on a node of a fleet (supervisor/fleet/README.md, "Sessions"): a session named by its
 * username belongs to one node. A connection for a session this node serves, or one without a
 * name (DEFAULT_SESSION), is routed here as always; one for a session another live node owns
 * goes to that node's SOCKS listener (the proxy worker dials it with the client's username and
 * the fleet's forwarding secret); one nobody alive owns is claimed here. Redis is asked only for
 * a name this node neither serves nor knows the owner of.
 */
export class FleetRouting {
  constructor(private readonly deps: FleetRoutingDeps) {}

  route(p: RouteParams, workerSlot: number): RouteResult | Promise<RouteResult> {
    // Keys DEFAULT_SESSION gives (an address's, the shared one) are each node's own.
    const key = p.listener === 'session-port' || !p.named ? null : p.key;
    if (key === null || this.deps.hasSession(key)) return this.deps.routeHere(p, workerSlot);
    if (p.forwarded !== true) {
      const owner = this.deps.fleet.rememberedOwner(key);
      if (owner) return this.forwardTo(owner, key);
    }
    return this.claimThenRoute(p, workerSlot, key);
  }

  private async claimThenRoute(p: RouteParams, workerSlot: number, key: string): Promise<RouteResult> {
    const ownership = await this.deps.fleet.claim(key, p.forwarded === true);
    if (ownership.kind === 'there') return this.forwardTo(ownership, key);
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

  private forwardTo(owner: { node: string; host: string; port: number }, key: string): RouteResult {
    return {
      ok: true,
      instance: FORWARDED_INSTANCE,
      host: owner.host,
      port: owner.port,
      key,
      session: null,
      lease: false,
      exitIp: '',
      forward: { node: owner.node, password: this.deps.fleet.forwardPassword },
    };
  }
}
