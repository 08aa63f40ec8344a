/**
 * The HTTP proxy listener: CONNECT tunnels and plain absolute-URI requests. Every request on a
 * keep-alive connection is authenticated, routed and dialled on its own (a new upstream per
 * request), so a session rotation takes effect on the very next plain request. Errors the proxy
 * makes itself are plain text and carry Proxy-Status (RFC 9209).
 */
import type net from 'node:net';
import { MAX_SESSION_KEY_BYTES, sessionKeyTooLong } from '../../shared/api/session-key.js';
import { childLogger, type Logger } from '../../shared/logger.js';
import type { ThrottledWarning } from '../../shared/logging/throttled-warning.js';
import { credentialRefusalLog } from './credential-refusal-log.js';
import { clientIpOf } from '../../shared/net/client-ip.js';
import { routeRequestFrom } from './client-address.js';
import { ConnectionAccounting, type OpenedConnection } from './connection-accounting.js';
import { PlainHttpExchange, type ExchangeOutcome } from './http-plain-exchange.js';
import {
  connectionLimitReached,
  dialFailedResponse,
  proxyAuthenticationRequired,
  routeRefusedResponse,
  serializeErrorResponse,
  type ProxyErrorResponse,
} from './http-proxy-errors.js';
import { HTTP_MAX_HEAD_BYTES, parseProxyRequestHead, type ProxyRequestHead } from './http-proxy-head.js';
import { ListeningServer, type ConnectionLifecycle, type OwnedConnection } from './listening-server.js';
import type { ProxyDependencies, RouteGranted } from './proxy-types.js';
import { EXIT_HEADER_NAME } from './http-response-head.js';
import { routeAndDial, upstreamOf } from './route-and-dial.js';
import { routeSafely } from './route-safely.js';
import { HTTP_CLOSE_LINGER_MS, OVER_BUDGET_LINGER_MS, resolveTimeouts, type ProxyTimeouts } from './proxy-timeouts.js';
import { SocksDialError, dialSocks5, type DialedUpstream } from './socks5-client.js';
import { targetFromHost } from './socks5-protocol.js';
import { Tunnel } from './tunnel.js';

export interface HttpProxyServerOptions extends ProxyDependencies {
  timeouts?: Partial<ProxyTimeouts>;
  /** Defaults to HTTP_MAX_HEAD_BYTES. */
  maxHeadBytes?: number;
  log?: Logger;
}

interface ConnectionContext {
  deps: ProxyDependencies;
  /** "credential refused", counted and written at a bounded rate (shared by the worker's listeners). */
  credentialRefusals: ThrottledWarning;
  timeouts: ProxyTimeouts;
  maxHeadBytes: number;
  log: Logger;
}

const CONNECT_ESTABLISHED = Buffer.from('HTTP/1.1 200 Connection Established\r\n\r\n', 'latin1');
const EMPTY = Buffer.alloc(0);

/** The HTTP proxy listener: a ListeningServer whose connections speak its protocol. */
export class HttpProxyServer extends ListeningServer {
  constructor(options: HttpProxyServerOptions) {
    const log = options.log ?? childLogger({ component: 'http-proxy-listener' });
    const context: ConnectionContext = {
      deps: options,
      credentialRefusals: options.credentialRefusals ?? credentialRefusalLog(log),
      timeouts: resolveTimeouts(options.timeouts),
      maxHeadBytes: options.maxHeadBytes ?? HTTP_MAX_HEAD_BYTES,
      log,
    };
    super(context.log, (socket, lifecycle) => new HttpProxyConnection(context, socket, lifecycle), {
      budget: options.budget,
      listener: 'http',
      refuse: refuseOverBudget,
    });
  }
}

/**
 * A 503 naming the reason, then a short linger that reads and drops what the client sent, so the
 * kernel does not answer unread request bytes with a reset that would destroy the response.
 */
function refuseOverBudget(socket: net.Socket): void {
  socket.setTimeout(OVER_BUDGET_LINGER_MS, () => socket.destroy());
  socket.on('end', () => socket.destroy());
  socket.resume();
  socket.end(serializeErrorResponse(connectionLimitReached(), false));
}

type ConnectionState = 'head' | 'busy' | 'tunnel' | 'closing';
/** first: a new connection waiting for its first byte; idle: keep-alive between requests; head: a head is arriving. */
type TimerKind = 'first' | 'idle' | 'head';

class HttpProxyConnection implements OwnedConnection {
  private state: ConnectionState = 'head';
  private pending: Buffer = EMPTY;
  private scannedTo = 0;
  private timer: NodeJS.Timeout | null = null;
  private timerKind: TimerKind = 'first';
  private requests = 0;
  private clientEnded = false;
  private dialAbort: AbortController | null = null;
  private readonly accounting: ConnectionAccounting;
  private exchange: PlainHttpExchange | null = null;
  private tunnel: Tunnel | null = null;
  /** Shutdown has begun: no further request is read on this connection. */
  private draining = false;

  constructor(
    private readonly context: ConnectionContext,
    private readonly socket: net.Socket,
    private readonly lifecycle: ConnectionLifecycle,
  ) {
    this.accounting = new ConnectionAccounting(context.deps.events, 'http');
  }

  start(): void {
    this.socket.on('data', this.onData);
    this.socket.on('end', this.onEnd);
    this.socket.on('error', this.onError);
    this.socket.on('close', this.onClose);
    this.enterHeadState();
  }

  shutdown(): void {
    this.draining = true;
    // Between requests (or with a head still arriving) nothing is in flight: close now. A request
    // or tunnel in progress finishes, and enterHeadState closes the connection after it.
    if (this.state === 'head') this.destroy();
  }

  destroy(): void {
    this.dialAbort?.abort();
    if (this.tunnel !== null) this.tunnel.destroy();
    this.exchange?.abort();
    this.socket.destroy();
    this.lifecycle.release(this);
  }

  // --- reading request heads ------------------------------------------------------------------

  private enterHeadState(): void {
    if (this.draining) {
      this.closeGracefully();
      return;
    }
    this.state = 'head';
    this.scannedTo = 0;
    if (this.pending.length > 0) {
      this.armTimer('head');
      this.processHead();
      return;
    }
    if (this.clientEnded) {
      this.closeGracefully();
      return;
    }
    this.armTimer(this.requests === 0 ? 'first' : 'idle');
    this.socket.resume();
  }

  private readonly onData = (chunk: Buffer): void => {
    if (this.state === 'closing') return;
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    if (this.state !== 'head') return;
    if (this.timerKind === 'idle') this.armTimer('head');
    this.processHead();
  };

  private processHead(): void {
    const parsed = parseProxyRequestHead(this.pending, { maxBytes: this.context.maxHeadBytes, scanFrom: this.scannedTo });
    if (parsed.status === 'need-more') {
      this.scannedTo = parsed.scannedTo;
      return;
    }
    this.socket.pause();
    this.clearTimer();
    this.state = 'busy';
    if (parsed.status === 'error') {
      const { error } = parsed;
      this.respond({ status: error.status, error: 'http_request_error', message: error.message }, false);
      return;
    }
    this.pending = this.pending.subarray(parsed.consumed);
    this.requests++;
    void this.handleRequest(parsed.head);
  }

  private armTimer(kind: TimerKind): void {
    this.clearTimer();
    this.timerKind = kind;
    const { httpHeadMs, httpKeepAliveIdleMs } = this.context.timeouts;
    this.timer = setTimeout(this.onTimer, kind === 'idle' ? httpKeepAliveIdleMs : httpHeadMs);
  }

  private clearTimer(): void {
    if (this.timer !== null) {
      clearTimeout(this.timer);
      this.timer = null;
    }
  }

  private readonly onTimer = (): void => {
    this.timer = null;
    if (this.state !== 'head') return;
    if (this.timerKind === 'idle') {
      this.closeGracefully();
      return;
    }
    this.state = 'busy';
    this.respond({ status: 408, error: 'http_request_error', message: 'request head not received in time' }, false);
  };

  // --- one request ----------------------------------------------------------------------------

  private async handleRequest(head: ProxyRequestHead): Promise<void> {
    const { context, socket } = this;
    const keepAliveAfterError = head.keepAlive && head.framing.kind === 'none';
    const credentials = head.credentials;
    let credential: string | null = null;
    if (context.deps.credentials.required) {
      const verdict = credentials === null ? ({ ok: false } as const) : context.deps.credentials.check(credentials.username, credentials.password);
      if (verdict.ok) credential = verdict.credential;
      else {
        context.credentialRefusals.note({
          listener: 'http',
          client: clientIpOf(socket.remoteAddress),
          reason: credentials === null ? 'missing' : 'invalid',
        });
        this.respond(proxyAuthenticationRequired(), keepAliveAfterError);
        return;
      }
    }
    // Without AUTH, a complete request head is what proves the client is not an idle socket.
    this.lifecycle.authenticated(this);
    const sessionKey = credentials?.username ?? null;
    if (sessionKey !== null && sessionKeyTooLong(sessionKey)) {
      // A SOCKS5 username cannot be longer, and the API could never address such a session.
      this.respond({ status: 400, error: 'http_request_error', message: `session key longer than ${MAX_SESSION_KEY_BYTES} bytes` }, keepAliveAfterError);
      return;
    }
    const request = routeRequestFrom(socket, sessionKey, 'http');
    const target = targetFromHost(head.target.host, head.target.port);
    const credentialOf = (): string => credential ?? `address:${clientIpOf(socket.remoteAddress)}`;
    let dialedRoute: RouteGranted | null = null;
    const outcome = await routeAndDial({
      listener: 'http',
      target,
      firstRoute: routeSafely(context.deps.router, request),
      reroute: () => routeSafely(context.deps.router, request),
      dial: (route) => {
        dialedRoute = route;
        const abort = new AbortController();
        // Shutdown aborts a dial in progress.
        this.dialAbort = abort;
        const promise = dialSocks5({
          ...upstreamOf(route, sessionKey, credentialOf),
          target,
          timeoutMs: context.timeouts.dialMs,
          signal: abort.signal,
        });
        return { promise, abort: () => abort.abort() };
      },
      // Routed for a client that is gone: the route goes back so the live count stays exact.
      clientGone: () => socket.destroyed,
      release: (route) => this.accounting.released(route),
      accounting: this.accounting,
      evidence: { host: target.host, credential: credentialOf },
      instanceDown: context.deps.instanceDown,
      dialMs: context.timeouts.dialMs,
      log: context.log,
    });
    this.dialAbort = null;
    switch (outcome.kind) {
      case 'client-gone':
        return;
      case 'no-route':
        this.respond(routeRefusedResponse(outcome.reason, outcome.detail), keepAliveAfterError);
        return;
      case 'instance-down':
        this.respond({ status: 502, error: 'destination_unavailable', message: 'instance stopped answering' }, keepAliveAfterError);
        return;
      case 'dial-failed':
        if (!(outcome.error instanceof SocksDialError)) this.respond({ status: 502, error: 'proxy_internal_error', message: 'dial failed' }, false);
        else if (!socket.destroyed) this.respond(dialFailedResponse(outcome.error, target.host), keepAliveAfterError);
        return;
      case 'dialed':
        break;
    }
    const extra = this.exitFields(dialedRoute);
    if (head.target.form === 'authority') this.startTunnel(outcome.connection, outcome.dialed, extra);
    else this.startExchange(outcome.connection, outcome.dialed, head, extra);
  }

  /** `Exitpool-Exit: <ip>` under EXIT_HEADER, when the pool knew the exit it routed to. */
  private exitFields(route: RouteGranted | null): string[] {
    const ip = route?.exitIp ?? '';
    return this.context.deps.exitHeader === true && ip !== '' ? [`${EXIT_HEADER_NAME}: ${ip}`] : [];
  }

  private startTunnel(connection: OpenedConnection, dialed: DialedUpstream, extraFields: readonly string[]): void {
    const { socket } = this;
    this.state = 'tunnel';
    socket.removeListener('data', this.onData);
    socket.removeListener('end', this.onEnd);
    socket.write(extraFields.length === 0 ? CONNECT_ESTABLISHED : Buffer.from(`HTTP/1.1 200 Connection Established\r\n${extraFields.map((f) => `${f}\r\n`).join('')}\r\n`, 'latin1'));
    const early = this.pending;
    this.pending = EMPTY;
    this.tunnel = new Tunnel(socket, dialed, this.context.timeouts.relayIdleMs, early, (result) => {
      connection.closed({ bytesUp: result.bytesUp, bytesDown: result.bytesDown, failure: result.failure, latencyMs: dialed.connectMs, endedAt: result.endedAt });
      this.lifecycle.release(this);
    });
    this.tunnel.start();
  }

  private startExchange(connection: OpenedConnection, dialed: DialedUpstream, head: ProxyRequestHead, extraFields: readonly string[]): void {
    const bodyStart = this.pending;
    this.pending = EMPTY;
    // The exchange reads the request body itself; the connection resumes reading heads after it.
    this.socket.removeListener('data', this.onData);
    this.exchange = new PlainHttpExchange(this.socket, dialed, head, bodyStart, this.context.timeouts.relayIdleMs, (outcome) => {
      this.exchange = null;
      connection.closed({ bytesUp: outcome.bytesUp, bytesDown: outcome.bytesDown, failure: outcome.failure, latencyMs: dialed.connectMs });
      this.afterExchange(outcome);
    }, extraFields);
    this.exchange.start();
  }

  private afterExchange(outcome: ExchangeOutcome): void {
    if (outcome.clientDestroyed) {
      this.lifecycle.release(this);
      return;
    }
    this.socket.on('data', this.onData);
    this.pending = outcome.leftover.length === 0 ? this.pending : Buffer.concat([outcome.leftover, this.pending]);
    if (outcome.reusable && !this.clientEnded) this.enterHeadState();
    else this.closeGracefully();
  }

  /** Writes a proxy-generated response, then either waits for the next head or closes. */
  private respond(response: ProxyErrorResponse, keepAlive: boolean): void {
    if (this.socket.destroyed) return;
    const persist = keepAlive && !this.clientEnded;
    this.socket.write(serializeErrorResponse(response, persist));
    if (persist) this.enterHeadState();
    else this.closeGracefully();
  }

  /** Ends our side after the last response, then lingers (see HTTP_CLOSE_LINGER_MS) before destroying. */
  private closeGracefully(): void {
    if (this.state === 'closing') return;
    this.state = 'closing';
    this.clearTimer();
    this.pending = EMPTY;
    this.socket.end();
    this.socket.resume();
    this.timer = setTimeout(this.onLingerDone, HTTP_CLOSE_LINGER_MS);
  }

  private readonly onLingerDone = (): void => {
    this.timer = null;
    this.socket.destroy();
  };

  // --- socket events --------------------------------------------------------------------------

  private readonly onEnd = (): void => {
    this.clientEnded = true;
    if (this.state === 'head') this.closeGracefully();
    // Both directions are done: nothing is left to linger for.
    else if (this.state === 'closing' && this.socket.writableFinished) this.socket.destroy();
  };

  private readonly onError = (): void => {
    // 'close' follows and cleans up; a client's socket error is not the pool's business.
  };

  private readonly onClose = (): void => {
    this.clearTimer();
    this.dialAbort?.abort();
    this.exchange?.abort();
    if (this.tunnel === null) this.lifecycle.release(this);
  };
}
