import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTcpServer, type AddressInfo, type Server as TcpServer, type Socket } from 'node:net';

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
  /** The session's exit when it was carried (FakeExitpool.exitIp). */
  exit: string;
  /** The proxy username it came with. */
  username: string;
}

/** One failure report the fake API received. */
export interface FakeReport {
  key: string;
  kind: string;
  reason: string;
  /** '' when the report named no domain. */
  domain: string;
}

/** How the fake pool answers a failure report: as today's service (no move), or as one that moves the session itself. */
export type ReportAnswerShape = { moved?: undefined } | { moved: false } | { moved: true; newExit: boolean };

/** What the fake proxy answers a CONNECT (HTTPS through the HTTP proxy); absent: 200 and a tunnel nobody uses. */
export interface ConnectRefusal {
  status: number;
  proxyStatus: string;
  body?: string;
}

/**
 * exitpool's HTTP proxy, its API and a site in one loopback server, for client tests that need
 * no Tor network: a request in absolute form (`GET http://site.test/…`, as a client sends it to
 * an HTTP proxy) is answered by `site`; a CONNECT is refused as `connectRefusal` says (and the
 * refusal recorded for GET /api/sessions/{key}/refusal); `/api/sessions/{key}/failure`,
 * `/rotate`, `/refusal` and `GET /api/sessions/{key}` are the pool's API, recorded. Each
 * rotation (or move on a report) puts the session on the next exit, `127.0.0.11`, `.12`, …;
 * `freshExits` bounds how many of those are new (after it, a rotation answers `new_exit: false`
 * and stays on the last one).
 */
export class FakeExitpool {
  readonly reports: FakeReport[] = [];
  readonly rotations: string[] = [];
  readonly carried: CarriedRequest[] = [];
  /** Every Authorization header the API saw, with the path. */
  readonly apiAuthorizations: { path: string; authorization: string | undefined }[] = [];
  /** How a failure report is answered (default: as today's service, no move). */
  reportAnswer: ReportAnswerShape = {};
  /** New exits a session can be moved to before moves stop finding one. */
  freshExits = Number.POSITIVE_INFINITY;
  /** How a CONNECT is answered (null: 200). */
  connectRefusal: ConnectRefusal | null = null;
  /** The refusal GET /api/sessions/{key}/refusal answers, with its age; set by a refused CONNECT. */
  refusal: { key: string; reason: string; detail: string; at: number; httpStatus: number; proxyStatusError: string; socksReply: number } | null = null;
  /** When set, every API path answers 307 to this origin (same path), as a misconfigured front might. */
  apiRedirectTo: string | null = null;
  /** How long a failure report takes to answer, ms (0: at once). */
  reportDelayMs = 0;
  /** Answer failure reports with this status instead (500: the API fails). */
  reportStatus = 200;
  private moves = 0;
  private connections = 0;
  /** Sockets a CONNECT took over, and SOCKS5 ones: the HTTP server does not track them. */
  private readonly tunnels = new Set<Socket>();
  private readonly socksServers: TcpServer[] = [];
  private readonly ids = new WeakMap<Socket, number>();

  private constructor(private readonly server: Server) {}

  static async start(site: (url: URL) => FakePage): Promise<FakeExitpool> {
    const server = createServer();
    const fake = new FakeExitpool(server);
    server.on('request', (req: IncomingMessage, res: ServerResponse) => void fake.handle(req, res, site));
    server.on('connect', (req: IncomingMessage, socket: Socket) => fake.connect(req, socket));
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

  /** The exit IP the session is on now. */
  exitIp(): string {
    return `127.0.0.${11 + Math.min(this.moves, this.freshExits)}`;
  }

  /**
   * A SOCKS5 listener that refuses every CONNECT with `reply` (RFC 1928) after username/password
   * authentication, recording the refusal for GET /api/sessions/{key}/refusal as the service's
   * supervisor would. Answers its address (host:port).
   */
  async refuseSocks(reply: number): Promise<string> {
    const server = createTcpServer((socket) => {
      this.tunnels.add(socket);
      socket.on('close', () => this.tunnels.delete(socket));
      socket.on('error', () => undefined);
      let stage: 'greeting' | 'auth' | 'connect' = 'greeting';
      let buffered = Buffer.alloc(0);
      socket.on('data', (chunk: Buffer) => {
        buffered = Buffer.concat([buffered, chunk]);
        if (stage === 'greeting' && buffered.length >= 2 && buffered.length >= 2 + (buffered[1] as number)) {
          buffered = buffered.subarray(2 + (buffered[1] as number));
          stage = 'auth';
          socket.write(Buffer.from([5, 2]));
        }
        if (stage === 'auth' && buffered.length >= 2) {
          const ulen = buffered[1] as number;
          if (buffered.length < 3 + ulen) return;
          const plen = buffered[2 + ulen] as number;
          if (buffered.length < 3 + ulen + plen) return;
          const username = buffered.subarray(2, 2 + ulen).toString();
          buffered = buffered.subarray(3 + ulen + plen);
          stage = 'connect';
          this.refusal = { key: decodeURIComponent(username.replace(/-country-.*$/, '')), reason: 'no_exit_in_country', detail: 'no exit in zz', at: Date.now(), httpStatus: 503, proxyStatusError: 'destination_unavailable', socksReply: reply };
          socket.write(Buffer.from([1, 0]));
        }
        if (stage === 'connect' && buffered.length >= 4) socket.end(Buffer.from([5, reply, 0, 1, 0, 0, 0, 0, 0, 0]));
      });
    });
    this.socksServers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return `127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  close(): Promise<void> {
    for (const server of this.socksServers) server.close();
    for (const socket of this.tunnels) socket.destroy();
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  /** Moves the session to the next exit; false when there was no new one. */
  private move(): boolean {
    const fresh = this.moves < this.freshExits;
    this.moves++;
    return fresh;
  }

  private connect(req: IncomingMessage, socket: Socket): void {
    this.tunnels.add(socket);
    socket.on('close', () => this.tunnels.delete(socket));
    socket.on('error', () => undefined);
    const refusal = this.connectRefusal;
    if (refusal === null) {
      socket.end('HTTP/1.1 200 Connection Established\r\n\r\n');
      return;
    }
    const key = decodeURIComponent(usernameOf(req).replace(/-country-.*$/, ''));
    this.refusal = { key, reason: 'no_exit_in_country', detail: refusal.body ?? '', at: Date.now(), httpStatus: refusal.status, proxyStatusError: 'destination_unavailable', socksReply: 3 };
    const body = `${refusal.body ?? 'refused'}\n`;
    socket.end(`HTTP/1.1 ${refusal.status} Refused\r\nProxy-Status: ${refusal.proxyStatus}\r\nContent-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
  }

  private async handle(req: IncomingMessage, res: ServerResponse, site: (url: URL) => FakePage): Promise<void> {
    const target = req.url ?? '/';
    if (/^https?:\/\//i.test(target)) {
      this.carried.push({ url: target, connection: this.ids.get(req.socket) ?? 0, exit: this.exitIp(), username: usernameOf(req) });
      req.resume();
      const page = site(new URL(target));
      const body = page.body ?? '';
      res.writeHead(page.status, { 'Content-Type': 'text/plain; charset=utf-8', 'Content-Length': Buffer.byteLength(body), 'Exitpool-Exit': this.exitIp(), ...page.headers });
      res.end(body);
      return;
    }
    let text = '';
    for await (const chunk of req) text += String(chunk);
    this.apiAuthorizations.push({ path: target, authorization: req.headers.authorization });
    if (this.apiRedirectTo !== null) {
      res.writeHead(307, { Location: `${this.apiRedirectTo}${target}` });
      res.end();
      return;
    }
    const m = /^\/api\/sessions\/([^/]+)(\/failure|\/rotate|\/refusal)?$/.exec(target);
    const key = decodeURIComponent(m?.[1] ?? '');
    const json = (status: number, value: unknown): void => {
      res.writeHead(status, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify(value));
    };
    if (m && m[2] === '/failure' && req.method === 'POST') {
      const r = JSON.parse(text) as { kind: string; reason: string; domain?: string };
      this.reports.push({ key, kind: r.kind, reason: r.reason, domain: r.domain ?? '' });
      if (this.reportDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, this.reportDelayMs));
      if (this.reportStatus !== 200) return json(this.reportStatus, { error: 'internal' });
      const base = { session: key, instance: 0, kind: r.kind, scored: true };
      const shape = this.reportAnswer;
      if (shape.moved === undefined) return json(200, base);
      if (!shape.moved) return json(200, { ...base, moved: false, exit_ip: this.exitIp(), new_exit: true, exit_note: '' });
      const fresh = shape.newExit && this.move();
      return json(200, { ...base, moved: true, exit_ip: this.exitIp(), new_exit: fresh, exit_note: fresh ? '' : 'no instance on an exit outside the session’s last 5 exits' });
    } else if (m && m[2] === '/rotate' && req.method === 'POST') {
      this.rotations.push(key);
      const fresh = this.move();
      json(200, { session: key, instance: 0, exit_ip: this.exitIp(), exit_confirmed: true, new_exit: fresh, exit_note: fresh ? '' : 'no instance on an exit outside the session’s last 5 exits' });
    } else if (m && m[2] === '/refusal' && req.method === 'GET') {
      const r = this.refusal?.key === key ? this.refusal : null;
      json(200, {
        session: key,
        refusal:
          r === null
            ? null
            : { reason: r.reason, detail: r.detail, at: new Date(r.at).toISOString(), age_ms: Date.now() - r.at, http_status: r.httpStatus, proxy_status_error: r.proxyStatusError, socks_reply: r.socksReply },
      });
    } else if (m && m[2] === undefined && req.method === 'GET') {
      json(200, { key, exit_ip: this.exitIp() });
    } else {
      json(404, { error: 'not_found' });
    }
  }
}

/** The proxy username of a request (Proxy-Authorization: Basic), '' when none. */
function usernameOf(req: IncomingMessage): string {
  const [scheme, value] = (req.headers['proxy-authorization'] ?? '').split(' ');
  if (scheme?.toLowerCase() !== 'basic' || value === undefined) return '';
  const decoded = Buffer.from(value, 'base64').toString();
  return decoded.slice(0, decoded.indexOf(':'));
}
