import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { isIPv4 } from 'node:net';
import type { Logger } from '../../shared/logger.js';
import { InvalidTestnetOptionsError } from './errors.js';

/** How the destination answers one source IP; "ok" echoes the caller's address. */
export type WhoamiBehaviour = 'ok' | 'forbidden' | 'captcha' | 'rate_limited' | 'reset';
export const WHOAMI_BEHAVIOURS: readonly WhoamiBehaviour[] = ['ok', 'forbidden', 'captcha', 'rate_limited', 'reset'];

/** Name under which exits reach the server through the network's DNS responder. */
export const WHOAMI_HOSTNAME = 'whoami.testnet';
/** Present in every captcha page, so a client (or test) can recognise the challenge. */
export const CAPTCHA_MARKER = 'exitpool-testnet-captcha';
export const WHOAMI_JSON_PATH = '/json';
/** `GET /slow?ms=N` answers like `/` after N milliseconds (at most WHOAMI_MAX_DELAY_MS): a request still in flight on cue. */
export const WHOAMI_SLOW_PATH = '/slow';
export const WHOAMI_MAX_DELAY_MS = 120_000;
export const RATE_LIMIT_RETRY_AFTER_SECONDS = 30;
/**
 * `GET /ip`: the IP-echo endpoint a pool measures each exit's egress address with
 * (EGRESS_PROBE_URLS). A service of its own in all but the port: its requests are not hits, and
 * the per-source behaviours of a site (captcha, block, …) never apply to it; its own
 * (`setEchoBehaviour`) lets a test make a probe fail.
 */
export const WHOAMI_ECHO_PATH = '/ip';

/** How the echo endpoint answers one source IP: its address, a reset, or a body that is no address. */
export type EchoBehaviour = 'ok' | 'reset' | 'garbage';

/** Body of GET /json. */
export interface WhoamiJson {
  readonly ip: string;
  readonly hits: number;
  readonly host: string | null;
  readonly path: string;
}

const CAPTCHA_PAGE = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Just a moment...</title></head>
<body>
<div id="${CAPTCHA_MARKER}" data-challenge="captcha">
<h1>Verify you are human</h1>
<p>Our systems have detected unusual traffic from your network. Please complete the challenge.</p>
<form method="post" action="/challenge"><div class="g-recaptcha" data-sitekey="testnet"></div><button type="submit">Continue</button></form>
</div>
</body>
</html>
`;

/** The path of a request target, origin-form or absolute-form; '/' when it cannot be read. */
function pathOf(target: string | undefined): string {
  try {
    return new URL(target ?? '/', 'http://whoami.invalid').pathname;
  } catch {
    return '/';
  }
}

/** IPv4-mapped IPv6 addresses ("::ffff:127.0.0.12") are reported in their IPv4 form. */
export function normaliseSourceIp(address: string | undefined): string {
  if (!address) return 'unknown';
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  return mapped?.[1] ?? address;
}

export interface WhoamiServerOptions {
  readonly host?: string;
  /** 0 picks a free port. */
  readonly port: number;
  readonly log: Logger;
}

/**
 * The destination of the test network: answers each request with the caller's source IP, so a
 * test sees which exit carried it (exits leave from 127.0.0.11, .12, …). It can be told per
 * source IP to refuse (403), challenge (captcha), rate-limit (429) or reset the connection, and
 * counts requests per source IP. Plain HTTP only; origin-form and absolute-form request targets
 * (as an HTTP proxy forwards them) are both understood.
 */
export class WhoamiServer {
  readonly host: string;
  readonly port: number;
  private readonly server: Server;
  private readonly log: Logger;
  private readonly behaviours = new Map<string, WhoamiBehaviour>();
  private readonly hitCounts = new Map<string, number>();
  private readonly echoCounts = new Map<string, number>();
  private readonly echoBehaviours = new Map<string, EchoBehaviour>();
  private closing: Promise<void> | undefined;
  /** Answers of /slow still waiting, cleared on close. */
  private readonly delayed = new Set<NodeJS.Timeout>();

  private constructor(server: Server, host: string, port: number, log: Logger) {
    this.server = server;
    this.host = host;
    this.port = port;
    this.log = log;
  }

  static start(options: WhoamiServerOptions): Promise<WhoamiServer> {
    const host = options.host ?? '127.0.0.1';
    let instance: WhoamiServer | undefined;
    const server = createServer((req, res) => instance?.handle(req, res));
    server.on('clientError', (_err, socket) => socket.destroy());
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen({ port: options.port, host, exclusive: true }, () => {
        server.off('error', reject);
        const address = server.address();
        const port = typeof address === 'object' && address !== null ? address.port : options.port;
        instance = new WhoamiServer(server, host, port, options.log);
        options.log.debug('whoami listening', { host, port });
        resolve(instance);
      });
    });
  }

  /** URL through the network's DNS name (exits resolve it; the host machine does not). */
  url(path = '/'): string {
    return `http://${WHOAMI_HOSTNAME}:${this.port}${path.startsWith('/') ? path : `/${path}`}`;
  }

  /** The IP-echo endpoint's URL through the network's DNS name (what EGRESS_PROBE_URLS names on this network). */
  echoUrl(): string {
    return this.url(WHOAMI_ECHO_PATH);
  }

  /** URL by address, reachable directly and through any exit. */
  directUrl(path = '/'): string {
    return `http://${this.host}:${this.port}${path.startsWith('/') ? path : `/${path}`}`;
  }

  setBehaviour(sourceIp: string, behaviour: WhoamiBehaviour): void {
    if (!isIPv4(sourceIp)) throw new InvalidTestnetOptionsError(`not an IPv4 source address: ${sourceIp}`);
    if (behaviour === 'ok') this.behaviours.delete(sourceIp);
    else this.behaviours.set(sourceIp, behaviour);
    this.log.debug('whoami behaviour set', { sourceIp, behaviour });
  }

  behaviourFor(sourceIp: string): WhoamiBehaviour {
    return this.behaviours.get(sourceIp) ?? 'ok';
  }

  clearBehaviours(): void {
    this.behaviours.clear();
  }

  /** Requests received from this source IP (every behaviour counts, resets included). */
  hits(sourceIp: string): number {
    return this.hitCounts.get(sourceIp) ?? 0;
  }

  /** Requests per source IP so far. */
  hitsBySource(): ReadonlyMap<string, number> {
    return new Map(this.hitCounts);
  }

  resetHits(): void {
    this.hitCounts.clear();
  }

  /** Requests to the echo endpoint from this source IP (egress probes). */
  echoHits(sourceIp: string): number {
    return this.echoCounts.get(sourceIp) ?? 0;
  }

  /** Echo requests per source IP so far. */
  echoHitsBySource(): ReadonlyMap<string, number> {
    return new Map(this.echoCounts);
  }

  setEchoBehaviour(sourceIp: string, behaviour: EchoBehaviour): void {
    if (!isIPv4(sourceIp)) throw new InvalidTestnetOptionsError(`not an IPv4 source address: ${sourceIp}`);
    if (behaviour === 'ok') this.echoBehaviours.delete(sourceIp);
    else this.echoBehaviours.set(sourceIp, behaviour);
  }

  clearEchoBehaviours(): void {
    this.echoBehaviours.clear();
  }

  /** GET /ip: the source address, or what setEchoBehaviour asked for. */
  private echo(ip: string, req: IncomingMessage, res: ServerResponse): void {
    this.echoCounts.set(ip, (this.echoCounts.get(ip) ?? 0) + 1);
    res.setHeader('Cache-Control', 'no-store');
    switch (this.echoBehaviours.get(ip) ?? 'ok') {
      case 'reset':
        req.socket.resetAndDestroy();
        return;
      case 'garbage':
        this.send(res, 200, 'text/html; charset=utf-8', '<html><body>not an address</body></html>\n');
        return;
      case 'ok':
        this.send(res, 200, 'text/plain; charset=utf-8', `${ip}\n`);
    }
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const ip = normaliseSourceIp(req.socket.remoteAddress);
    if (pathOf(req.url) === WHOAMI_ECHO_PATH) return this.echo(ip, req, res);
    const hits = (this.hitCounts.get(ip) ?? 0) + 1;
    this.hitCounts.set(ip, hits);
    const behaviour = this.behaviourFor(ip);
    // Absolute-form targets ("GET http://whoami.testnet:PORT/json") carry their own origin.
    let path = '/';
    let delayMs = 0;
    try {
      const url = new URL(req.url ?? '/', 'http://whoami.invalid');
      path = url.pathname;
      if (path === WHOAMI_SLOW_PATH) delayMs = Math.min(WHOAMI_MAX_DELAY_MS, Math.max(0, Number(url.searchParams.get('ms')) || 0));
    } catch {
      // keep "/" for an unparseable target
    }
    if (delayMs > 0) {
      const timer = setTimeout(() => {
        this.delayed.delete(timer);
        if (!res.destroyed) this.send(res, 200, 'text/plain; charset=utf-8', `${ip}\n`);
      }, delayMs);
      this.delayed.add(timer);
      return;
    }
    res.setHeader('X-Whoami-Behaviour', behaviour);
    res.setHeader('Cache-Control', 'no-store');
    switch (behaviour) {
      case 'reset':
        req.socket.resetAndDestroy();
        return;
      case 'forbidden':
        this.send(res, 403, 'text/plain; charset=utf-8', `Forbidden: ${ip} is blocked\n`);
        return;
      case 'captcha':
        this.send(res, 200, 'text/html; charset=utf-8', CAPTCHA_PAGE);
        return;
      case 'rate_limited':
        res.setHeader('Retry-After', String(RATE_LIMIT_RETRY_AFTER_SECONDS));
        this.send(res, 429, 'text/plain; charset=utf-8', 'Too Many Requests\n');
        return;
      case 'ok':
        break;
    }
    if (path === WHOAMI_JSON_PATH) {
      const body: WhoamiJson = { ip, hits, host: req.headers.host ?? null, path };
      this.send(res, 200, 'application/json', JSON.stringify(body) + '\n');
    } else {
      this.send(res, 200, 'text/plain; charset=utf-8', `${ip}\n`);
    }
  }

  private send(res: ServerResponse, status: number, contentType: string, body: string): void {
    res.writeHead(status, { 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(body) });
    res.end(body);
  }

  close(): Promise<void> {
    for (const timer of this.delayed) clearTimeout(timer);
    this.delayed.clear();
    this.closing ??= new Promise((resolve) => {
      this.server.close(() => resolve());
      // Keep-alive connections would hold close() open until they idle out.
      this.server.closeAllConnections();
    });
    return this.closing;
  }
}
