/**
 * The SOCKS5 listener (and its session-port variant): handshake under a deadline, credential
 * refusal in the handshake, one route decision per connection, a dial through the chosen
 * instance's SocksPort, then a raw tunnel. tor's own refusal code reaches the client unchanged.
 *
 * Why not the `socksv5` package: see docs/architecture.md (2-byte error replies, success sent
 * before dialling in intercept mode, no handshake deadline, local DNS resolution, deprecated
 * Buffer constructor, username not available to the connection handler).
 */
import type net from 'node:net';
import { childLogger, type Logger } from '../../shared/logger.js';
import type { ThrottledWarning } from '../../shared/logging/throttled-warning.js';
import { credentialRefusalLog } from './credential-refusal-log.js';
import { clientIpOf } from '../../shared/net/client-ip.js';
import { routeRequestFrom } from './client-address.js';
import type { ConnectionBudget } from './connection-budget.js';
import { ConnectionAccounting, type OpenedConnection } from './connection-accounting.js';
import { INSTANCE_DOWN_FAILURE, type InstanceDownSignal } from './instance-down.js';
import { socksReplyForDialError } from './dial-failure.js';
import { ListeningServer, type ConnectionLifecycle, type OwnedConnection } from './listening-server.js';
import type { ConnectionEvidence, ListenerKind, ProxyDependencies, ProxyEvents, RouteDecision, RouteGranted, RouteRefusalReason, Router } from './proxy-types.js';
import { dialFailureReport, routeAndDial, upstreamOf } from './route-and-dial.js';
import { routeSafely } from './route-safely.js';
import { resolveTimeouts, type ProxyTimeouts } from './proxy-timeouts.js';
import { SocksDialError, Socks5Upstream, type DialedUpstream, type DialListener } from './socks5-client.js';
import { Socks5ServerHandshake, type HandshakeAuthMode, type HandshakeRefusal, type HandshakeStep } from './socks5-handshake.js';
import { AuthMethod, REPLY_SUCCEEDED, ReplyCode, encodeReply, type Socks5Target } from './socks5-protocol.js';
import { Tunnel } from './tunnel.js';

export interface Socks5ProxyServerOptions extends ProxyDependencies {
  /**
   * Set for a session port: the listener is credential-free (usernames are read and ignored)
   * and every route request names this instance. Prefer createSessionPortServer.
   */
  pinnedInstanceId?: number;
  /**
   * `hop`: the internal listener where other nodes of the fleet forward their sessions
   * (HOP_PORT): `credentials` checks hop credentials, always required, and its connections are
   * routed as `hop` (served here, never forwarded again). Default `socks`, the clients' listener.
   */
  kind?: 'socks' | 'hop';
  timeouts?: Partial<ProxyTimeouts>;
  log?: Logger;
}

export interface SessionPortServerOptions {
  /** The instance this port is pinned to (port = SESSION_PORT_BASE + instanceId). */
  instanceId: number;
  router: Router;
  events: ProxyEvents;
  budget?: ConnectionBudget;
  instanceDown?: InstanceDownSignal;
  timeouts?: Partial<ProxyTimeouts>;
  log?: Logger;
}

interface ConnectionContext {
  listener: ListenerKind;
  /** The listener's accounting (stateless: one for all its connections). */
  accounting: ConnectionAccounting;
  /** "credential refused", counted and written at a bounded rate (shared by the worker's listeners). */
  credentialRefusals: ThrottledWarning;
  authMode: HandshakeAuthMode;
  pinnedInstanceId: number | undefined;
  deps: ProxyDependencies;
  timeouts: ProxyTimeouts;
  log: Logger;
}

const NEVER_CHECKED = (): { ok: false } => ({ ok: false });

/** The SOCKS5 listener (or a session port): a ListeningServer whose connections speak its protocol. */
export class Socks5ProxyServer extends ListeningServer {
  constructor(options: Socks5ProxyServerOptions) {
    const pinnedInstanceId = options.pinnedInstanceId;
    const pinned = pinnedInstanceId !== undefined;
    const log = options.log ?? childLogger({ component: pinned ? 'session-port' : options.kind === 'hop' ? 'hop-listener' : 'socks5-listener' });
    const kind = options.kind ?? 'socks';
    const listener: ListenerKind = pinned ? 'session-port' : kind;
    const context: ConnectionContext = {
      listener,
      accounting: new ConnectionAccounting(options.events, listener),
      credentialRefusals: options.credentialRefusals ?? credentialRefusalLog(log),
      // AUTH_DISABLED never opens the hop listener: a hop credential is always required there.
      authMode: pinned ? 'ignored' : kind === 'hop' || options.credentials.required ? 'required' : 'optional',
      pinnedInstanceId,
      deps: options,
      timeouts: resolveTimeouts(options.timeouts),
      log,
    };
    // SOCKS5 has no way to give a reason before the client's greeting is answered: a connection
    // over the budget is closed at once (the worker logs why, and /metrics counts it).
    super(context.log, (socket, lifecycle) => new Socks5Connection(context, socket, lifecycle), {
      budget: options.budget,
      listener: context.listener,
      refuse: (socket) => socket.destroy(),
    });
  }
}

/**
 * A credential-free SOCKS5 listener pinned to one instance (SESSION_PORT_BASE). Usernames a
 * client sends anyway are read and ignored: traffic is accounted under the instance.
 */
export function createSessionPortServer(options: SessionPortServerOptions): Socks5ProxyServer {
  const deps: Socks5ProxyServerOptions = {
    router: options.router,
    events: options.events,
    credentials: { required: false, check: NEVER_CHECKED },
    pinnedInstanceId: options.instanceId,
  };
  if (options.timeouts !== undefined) deps.timeouts = options.timeouts;
  if (options.log !== undefined) deps.log = options.log;
  if (options.budget !== undefined) deps.budget = options.budget;
  if (options.instanceDown !== undefined) deps.instanceDown = options.instanceDown;
  return new Socks5ProxyServer(deps);
}

/**
 * One SOCKS5 client connection. Routing starts as soon as the handshake settles the session key
 * (after the credentials, before the request), and once the route is known the instance's
 * SocksPort is connected and greeted, all while the client's CONNECT is on its way: the client
 * then waits only for tor's answer to the CONNECT (docs/architecture.md, "Connection setup").
 * A route granted to a connection that never sends its CONNECT is handed back (released), so
 * the supervisor's live-connection counts stay exact.
 */
class Socks5Connection implements OwnedConnection, ConnectionEvidence, DialListener {
  private readonly handshake: Socks5ServerHandshake;
  private handshakeTimer: NodeJS.Timeout | null = null;
  /** The route decision, requested on 'authenticated': known at once from a lease, else on its way. */
  private routing: RouteDecision | Promise<RouteDecision> | null = null;
  /** ConnectionEvidence: the destination the CONNECT named. */
  host = '';
  /** The dial of a route known at the CONNECT (dialKnown), until it ends. */
  private known: { route: RouteGranted; connection: OpenedConnection; target: Socks5Target; rest: Buffer; sessionKey: string | null; instanceDown: boolean } | null = null;
  /** A granted route no dial has taken yet; released if the connection ends first. */
  private unusedRoute: RouteGranted | null = null;
  private readonly accounting: ConnectionAccounting;
  /** The instance connection opened ahead of the CONNECT, or being dialled. */
  private upstream: Socks5Upstream | null = null;
  /** Set once the connection can no longer reach its CONNECT (closed, refused, timed out). */
  private abandoned = false;
  private tunnel: Tunnel | null = null;
  /** The client's CONNECT arrived: from here on the connection has a request in flight. */
  private connecting = false;

  constructor(
    private readonly context: ConnectionContext,
    private readonly socket: net.Socket,
    private readonly lifecycle: ConnectionLifecycle,
  ) {
    this.handshake = new Socks5ServerHandshake(context.authMode, context.deps.credentials.check);
    this.accounting = context.accounting;
  }

  start(): void {
    const { socket } = this;
    socket.on('data', this.onData);
    socket.on('error', this.onError);
    socket.on('close', this.onClose);
    socket.on('end', this.onEndDuringHandshake);
    this.handshakeTimer = setTimeout(this.onHandshakeTimeout, this.context.timeouts.socksHandshakeMs);
  }

  shutdown(): void {
    // A tunnel, or a CONNECT being dialled, finishes; a handshake short of its request ends now.
    if (this.tunnel === null && !this.connecting) this.destroy();
  }

  destroy(): void {
    this.abandonRoute();
    this.upstream?.abort();
    if (this.tunnel !== null) this.tunnel.destroy();
    else this.socket.destroy();
    this.lifecycle.release(this);
  }

  private readonly onData = (chunk: Buffer): void => {
    const steps = this.handshake.feed(chunk);
    // An index loop: for-of over the steps made an iterator per chunk on this hot path.
    for (let i = 0; i < steps.length; i++) this.perform(steps[i] as HandshakeStep);
  };

  private perform(step: HandshakeStep): void {
    switch (step.type) {
      case 'send':
        this.socket.write(step.bytes);
        return;
      case 'authenticated':
        this.lifecycle.authenticated(this);
        this.routing = this.requestRoute(step.sessionKey);
        return;
      case 'close':
        this.endHandshake();
        this.abandonRoute();
        this.logRefusal(step.refusal);
        this.socket.destroySoon();
        return;
      case 'connect': {
        this.connecting = true;
        this.endHandshake();
        this.host = step.target.host;
        const routing = this.routing;
        // A route still on its way (a session's first connections on this worker) is waited for,
        // then dialled as a known one; only a refusal or a re-route goes through routeAndDial.
        if (routing instanceof Promise) void routing.then((decision) => this.dialRouted(decision, step));
        else this.dialRouted(routing, step);
        return;
      }
    }
  }

  /**
   * Asks for a route and, once granted, opens the instance connection ahead of the CONNECT. A
   * route the router holds already (a lease) is taken at once, with no promise in between.
   */
  private requestRoute(sessionKey: string | null): RouteDecision | Promise<RouteDecision> {
    const { context, socket } = this;
    const request = routeRequestFrom(socket, sessionKey, context.listener, context.pinnedInstanceId);
    const router = context.deps.router;
    let known: RouteDecision | undefined;
    try {
      known = router.routeKnown?.(request);
    } catch {
      known = undefined;
    }
    if (known !== undefined) return this.routed(known, sessionKey);
    return routeSafely(router, request).then((decision) => this.routed(decision, sessionKey));
  }

  /** A route decided: kept with its instance connection opened, or handed back when the client already left. */
  private routed(decision: RouteDecision, sessionKey: string | null): RouteDecision {
    if (!decision.ok) return decision;
    if (this.abandoned) {
      this.accounting.released(decision);
    } else {
      this.unusedRoute = decision;
      this.upstream = new Socks5Upstream(upstreamOf(decision, sessionKey, () => this.credential()));
    }
    return decision;
  }

  /** The CONNECT once its route is decided: dialled at once when granted and its instance connection is open. */
  private dialRouted(decision: RouteDecision | null, step: { target: Socks5Target; sessionKey: string | null; rest: Buffer }): void {
    if (decision !== null && decision.ok && this.upstream !== null && !this.abandoned) this.dialKnown(decision, step);
    else void this.connect(step.target, step.sessionKey, step.rest);
  }

  /**
   * The CONNECT of a route known when it arrived, its instance connection open: one dial, as
   * routeAndDial's first attempt, with callbacks instead of promises (the common case: a
   * session's leased connections). An instance reported down mid-dial goes to routeAndDial for
   * its one re-route.
   */
  private dialKnown(route: RouteGranted, step: { target: Socks5Target; sessionKey: string | null; rest: Buffer }): void {
    const upstream = this.upstream as Socks5Upstream;
    if (this.socket.destroyed) {
      this.abandonRoute();
      this.upstream = null;
      return;
    }
    const connection = this.accounting.opened(route, this);
    this.unusedRoute = null;
    this.known = { route, connection, target: step.target, rest: step.rest, sessionKey: step.sessionKey, instanceDown: false };
    this.context.deps.instanceDown?.add(route.instance, this.onKnownInstanceDown);
    upstream.connectWith(step.target, this.context.timeouts.dialMs, this);
  }

  private readonly onKnownInstanceDown = (): void => {
    if (this.known === null) return;
    this.known.instanceDown = true;
    this.upstream?.abort();
  };

  /** DialListener: the known route's dial succeeded. */
  dialed(dialed: DialedUpstream): void {
    const known = this.known as NonNullable<Socks5Connection['known']>;
    this.known = null;
    this.upstream = null;
    this.context.deps.instanceDown?.remove(known.route.instance, this.onKnownInstanceDown);
    if (this.socket.destroyed) {
      dialed.socket.destroy();
      known.connection.closed({ bytesUp: 0, bytesDown: 0, failure: null, latencyMs: dialed.connectMs });
      return;
    }
    this.startTunnel(known.connection, dialed, known.rest);
  }

  /** DialListener: the known route's dial failed (or its instance went down: re-routed once). */
  dialFailed(error: SocksDialError): void {
    const known = this.known as NonNullable<Socks5Connection['known']>;
    this.known = null;
    this.upstream = null;
    this.context.deps.instanceDown?.remove(known.route.instance, this.onKnownInstanceDown);
    if (!known.instanceDown || this.socket.destroyed) {
      known.connection.closed(dialFailureReport(error, known.target, known.connection));
      if (!this.socket.destroyed) this.refuse(socksReplyForDialError(error));
      return;
    }
    known.connection.closed({ bytesUp: 0, bytesDown: 0, failure: INSTANCE_DOWN_FAILURE, latencyMs: error.elapsedMs });
    this.context.log.info('re-routing a dial away from an instance that stopped answering', { listener: this.context.listener, instance: known.route.instance });
    this.routing = null;
    void this.connect(known.target, known.sessionKey, known.rest, true);
  }

  /** Who opened the connection (ConnectionEvidence): its token (on the hop listener, the one its hop credential carries), else its address (AUTH_DISABLED), or its session port. */
  credential(): string {
    if (this.context.pinnedInstanceId !== undefined) return 'session-port';
    return this.handshake.credential ?? `address:${clientIpOf(this.socket.remoteAddress)}`;
  }

  /** The connection will not reach its CONNECT: close the opened instance connection and hand the route back. */
  private abandonRoute(): void {
    if (this.abandoned) return;
    this.abandoned = true;
    if (this.unusedRoute === null) return;
    this.upstream?.abort();
    this.upstream = null;
    this.accounting.released(this.unusedRoute);
    this.unusedRoute = null;
  }

  /** Stops reading until the tunnel starts: bytes the client sends early stay in the kernel (backpressure). */
  private endHandshake(): void {
    this.socket.removeListener('data', this.onData);
    this.socket.removeListener('end', this.onEndDuringHandshake);
    this.socket.pause();
    if (this.handshakeTimer !== null) {
      clearTimeout(this.handshakeTimer);
      this.handshakeTimer = null;
    }
  }

  /** Routing and dialling through routeAndDial: a route still on its way, or the re-route after a known route's instance went down. */
  private async connect(target: Socks5Target, sessionKey: string | null, rest: Buffer, rerouted = false): Promise<void> {
    const { context, socket } = this;
    const outcome = await routeAndDial({
      listener: context.listener,
      target,
      // The handshake announces 'authenticated' before every 'connect'; the fallback keeps this
      // method correct on its own. (Promise.resolve: a leased route is a decision, not a promise.)
      firstRoute: Promise.resolve(this.routing ?? this.requestRoute(sessionKey)),
      reroute: () => Promise.resolve(this.requestRoute(sessionKey)),
      rerouted,
      dial: (route) => {
        // The connection opened ahead of the CONNECT for this route, or a new one.
        const upstream = this.upstream ?? new Socks5Upstream(upstreamOf(route, sessionKey, () => this.credential()));
        this.upstream = upstream;
        this.unusedRoute = null;
        return { promise: upstream.connect(target, context.timeouts.dialMs), abort: () => upstream.abort() };
      },
      clientGone: () => socket.destroyed,
      release: () => this.abandonRoute(),
      accounting: this.accounting,
      evidence: this,
      instanceDown: context.deps.instanceDown,
      dialMs: context.timeouts.dialMs,
      log: context.log,
    });
    this.upstream = null;
    switch (outcome.kind) {
      case 'client-gone':
        return;
      case 'no-route':
        context.log.debug('no route', { listener: context.listener, reason: outcome.reason, detail: outcome.detail });
        this.refuse(socksReplyForRefusal(outcome.reason));
        return;
      case 'instance-down':
        this.refuse(ReplyCode.GeneralFailure);
        return;
      case 'dial-failed':
        if (!(outcome.error instanceof SocksDialError)) socket.destroy();
        else if (!socket.destroyed) this.refuse(socksReplyForDialError(outcome.error));
        return;
      case 'dialed':
        break;
    }
    this.startTunnel(outcome.connection, outcome.dialed, rest);
  }

  /** tor said yes: the client is told so and bytes flow both ways. */
  private startTunnel(connection: OpenedConnection, dialed: DialedUpstream, rest: Buffer): void {
    const { socket } = this;
    socket.write(REPLY_SUCCEEDED);
    socket.removeListener('error', this.onError);
    socket.removeListener('close', this.onClose);
    this.tunnel = new Tunnel(socket, dialed, this.context.timeouts.relayIdleMs, rest, (result) => {
      connection.closed({ bytesUp: result.bytesUp, bytesDown: result.bytesDown, failure: result.failure, latencyMs: dialed.connectMs, endedAt: result.endedAt });
      this.lifecycle.release(this);
    });
    this.tunnel.start();
  }

  /** The CONNECT's failure reply, then the end of the connection. */
  private refuse(code: number): void {
    this.socket.end(encodeReply(code));
    this.socket.destroySoon();
  }

  private logRefusal(refusal: HandshakeRefusal): void {
    const { log, listener } = this.context;
    const client = clientIpOf(this.socket.remoteAddress);
    switch (refusal.kind) {
      case 'credential-refused':
        this.context.credentialRefusals.note({ listener, client, reason: refusal.usernamePresent ? 'invalid' : 'missing' });
        return;
      case 'no-acceptable-method':
        if (this.context.authMode === 'required' && !refusal.offeredMethods.includes(AuthMethod.UsernamePassword)) {
          this.context.credentialRefusals.note({ listener, client, reason: 'missing' });
        } else {
          log.debug('no acceptable SOCKS5 method', { listener, client, offered: refusal.offeredMethods });
        }
        return;
      case 'command-not-supported':
        log.debug('SOCKS5 command not supported', { listener, client, command: refusal.command });
        return;
      case 'protocol-error':
        log.debug('SOCKS5 protocol error', { listener, client, error: refusal.error.code });
        return;
    }
  }

  private readonly onHandshakeTimeout = (): void => {
    this.handshakeTimer = null;
    this.context.log.debug('SOCKS5 handshake deadline passed', { listener: this.context.listener, client: clientIpOf(this.socket.remoteAddress) });
    this.socket.destroy();
  };

  /** A client that half-closes before finishing the handshake will never finish it. */
  private readonly onEndDuringHandshake = (): void => {
    this.socket.destroy();
  };

  private readonly onError = (): void => {
    // 'close' follows and does the cleanup; the error itself is the client's business.
  };

  private readonly onClose = (): void => {
    if (this.handshakeTimer !== null) {
      clearTimeout(this.handshakeTimer);
      this.handshakeTimer = null;
    }
    this.abandonRoute();
    // A dial in progress ends as 'aborted', which is nobody's failure (dial-failure.ts).
    this.upstream?.abort();
    if (this.tunnel === null) this.lifecycle.release(this);
  };
}

/**
 * The SOCKS5 reply for a route refused before any dial: a username whose session parameters are
 * malformed is "not allowed by ruleset" (2), a country with no exit "network unreachable" (3);
 * everything else is the pool's own trouble, "general failure" (1).
 */
export function socksReplyForRefusal(reason: RouteRefusalReason): number {
  switch (reason) {
    case 'bad_session_params':
      return ReplyCode.NotAllowedByRuleset;
    case 'no_exit_in_country':
    case 'country_wait_timeout':
      return ReplyCode.NetworkUnreachable;
    default:
      return ReplyCode.GeneralFailure;
  }
}
