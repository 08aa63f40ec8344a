import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** What the fake site answers for one URL. */
export interface FakePage {
  status: number;
  headers?: Record<string, string>;
  body?: string;
}

/** One request the fake HTTP proxy carried to the site. */
export interface CarriedRequest {
  url: string;
  /** Which TCP connection to the proxy carried it (1, 2, … in the order they were opened). */
  connection: number;
}

/**
 * exitpool's HTTP proxy, its API and a site in one loopback server, for client tests that need
 * no Tor network: a request in absolute form (`GET http://site.test/…`, as a client sends it to
 * an HTTP proxy) is answered by `site`; `/api/sessions/{key}/failure`, `/rotate` and
 * `GET /api/sessions/{key}` are the pool's API, recorded. HTTP only (no CONNECT).
 */
export class FakeExitpool {
  readonly reports: { key: string; kind: string; reason: string; domain: string }[] = [];
  readonly rotations: string[] = [];
  readonly carried: CarriedRequest[] = [];
  private connections = 0;
  private readonly ids = new WeakMap<Socket, number>();

  private constructor(private readonly server: Server) {}

  static async start(site: (url: URL) => FakePage): Promise<FakeExitpool> {
    const server = createServer();
    const fake = new FakeExitpool(server);
    server.on('request', (req: IncomingMessage, res: ServerResponse) => void fake.handle(req, res, site));
    server.on('connection', (socket: Socket) => fake.ids.set(socket, ++fake.connections));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return fake;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** The exit IP the session is on after `rotations.length` rotations. */
  exitIp(): string {
    return `127.0.0.${11 + this.rotations.length}`;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse, site: (url: URL) => FakePage): Promise<void> {
    const target = req.url ?? '/';
    if (/^https?:\/\//i.test(target)) {
      this.carried.push({ url: target, connection: this.ids.get(req.socket) ?? 0 });
      req.resume();
      const page = site(new URL(target));
      const body = page.body ?? '';
      res.writeHead(page.status, { 'Content-Type': 'text/plain; charset=utf-8', 'Content-Length': Buffer.byteLength(body), 'Exitpool-Exit': this.exitIp(), ...page.headers });
      res.end(body);
      return;
    }
    let text = '';
    for await (const chunk of req) text += String(chunk);
    const m = /^\/api\/sessions\/([^/]+)(\/failure|\/rotate)?$/.exec(target);
    const key = decodeURIComponent(m?.[1] ?? '');
    const json = (status: number, value: unknown): void => {
      res.writeHead(status, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify(value));
    };
    if (m && m[2] === '/failure' && req.method === 'POST') {
      const r = JSON.parse(text) as { kind: string; reason: string; domain?: string };
      this.reports.push({ key, kind: r.kind, reason: r.reason, domain: r.domain ?? '' });
      json(200, { session: key, instance: 0, kind: r.kind, scored: true });
    } else if (m && m[2] === '/rotate' && req.method === 'POST') {
      this.rotations.push(key);
      json(200, { session: key, exit_ip: this.exitIp() });
    } else if (m && m[2] === undefined && req.method === 'GET') {
      json(200, { key, exit_ip: this.exitIp() });
    } else {
      json(404, { error: 'not_found' });
    }
  }
}
