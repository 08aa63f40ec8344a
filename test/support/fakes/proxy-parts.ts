/**
 * Fakes for the proxy listeners' component tests: a router that records what it was asked, an
 * event recorder that keeps every accounting hook, and a logger whose lines can be inspected.
 */
import { Writable } from 'node:stream';
import winston from 'winston';
import type { ConnectionEvidence, ConnectionStats, ListenerKind, ProxyEvents, RouteDecision, RouteGranted, RouteRequest, Router } from '../../../workers/proxy/proxy-types.js';

/** A route granted to `instance` on a SOCKS endpoint, as the supervisor answers one (no lease, exit unknown). */
export function grantedRoute(instance: number, endpoint: { host: string; port: number }, key: string | null): RouteGranted {
  return { ok: true, instance, host: endpoint.host, port: endpoint.port, key, session: null, lease: false, exitIp: '' };
}

export class FakeRouter implements Router {
  readonly requests: RouteRequest[] = [];
  constructor(public decide: (request: RouteRequest, index: number) => RouteDecision) {}
  route(request: RouteRequest): Promise<RouteDecision> {
    this.record(request);
    return Promise.resolve(this.decide(request, this.requests.length - 1));
  }

  protected record(request: RouteRequest): void {
    // A snapshot: the listeners make clientIp a getter that reads the socket, which is gone
    // by the time a test looks.
    this.requests.push({
      sessionKey: request.sessionKey,
      clientIp: request.clientIp,
      listener: request.listener,
      ...(request.instanceId === undefined ? {} : { instanceId: request.instanceId }),
    });
  }
}

/**
 * A router that holds every decision already, as LeasedRouter does for a leased session: the
 * listener gets it from routeKnown() in the same turn (its no-promise path). route() still
 * answers for re-routes and the HTTP listener.
 */
export class KnownRouter extends FakeRouter {
  routeKnown(request: RouteRequest): RouteDecision {
    this.record(request);
    return this.decide(request, this.requests.length - 1);
  }
}

/** The two ways a listener gets its route: asked of the supervisor (a promise), or known at once (a lease). */
export const ROUTINGS = ['asked', 'known'] as const;
export type Routing = (typeof ROUTINGS)[number];

export function fakeRouter(routing: Routing, decide: (request: RouteRequest, index: number) => RouteDecision): FakeRouter {
  return routing === 'known' ? new KnownRouter(decide) : new FakeRouter(decide);
}

export class RecordingEvents implements ProxyEvents {
  readonly opened: RouteGranted[] = [];
  /** What each connection told the verdicts as it started (the site it is on its way to). */
  readonly openedEvidence: ConnectionEvidence[] = [];
  readonly closed: Array<{ route: RouteGranted; listener: ListenerKind; stats: ConnectionStats }> = [];
  readonly released: Array<{ route: RouteGranted; listener: ListenerKind }> = [];
  connectionOpened(route: RouteGranted, _listener: ListenerKind, evidence: ConnectionEvidence): void {
    this.opened.push(route);
    this.openedEvidence.push(evidence);
  }
  connectionClosed(route: RouteGranted, listener: ListenerKind, stats: ConnectionStats): void {
    this.closed.push({ route, listener, stats });
  }
  connectionReleased(route: RouteGranted, listener: ListenerKind): void {
    this.released.push({ route, listener });
  }
}

export function capturingLogger(): { logger: winston.Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      callback();
    },
  });
  return { logger: winston.createLogger({ level: 'debug', format: winston.format.json(), transports: [new winston.transports.Stream({ stream })] }), lines };
}

