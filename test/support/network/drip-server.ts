/**
 * A destination for the fault tests, reached through the exits as `<anything>.testnet:<port>`:
 * GET /drip answers slowly (a line every `DRIP_INTERVAL_MS` for up to a minute), so a request
 * is certainly in flight when a fault strikes; every other path answers "ok" at once. It owns
 * its sockets and destroys them on close().
 */
import http from 'node:http';
import type net from 'node:net';

export const DRIP_INTERVAL_MS = 200;
const DRIP_LIMIT_MS = 60_000;

export class DripServer {
  private readonly sockets = new Set<net.Socket>();
  private readonly timers = new Set<NodeJS.Timeout>();
  /** Requests to /drip that have begun streaming. */
  dripsStarted = 0;

  private constructor(
    private readonly server: http.Server,
    readonly port: number,
  ) {}

  static async start(): Promise<DripServer> {
    const server = http.createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const drip = new DripServer(server, (server.address() as net.AddressInfo).port);
    server.on('connection', (s) => {
      drip.sockets.add(s);
      s.once('close', () => drip.sockets.delete(s));
    });
    server.on('request', (req, res) => drip.handle(req, res));
    return drip;
  }

  /** The URL as the exits resolve it (the test network's DNS maps *.testnet to 127.0.0.1). */
  url(path: string): string {
    return `http://drip.testnet:${this.port}${path}`;
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    if (path !== '/drip') {
      res.writeHead(200, { 'Content-Type': 'text/plain' }).end('ok\n');
      return;
    }
    this.dripsStarted += 1;
    res.writeHead(200, { 'Content-Type': 'text/plain' });
    res.flushHeaders();
    const started = Date.now();
    const timer = setInterval(() => {
      if (Date.now() - started > DRIP_LIMIT_MS || res.destroyed) {
        clearInterval(timer);
        this.timers.delete(timer);
        res.end();
        return;
      }
      res.write('drip\n');
    }, DRIP_INTERVAL_MS);
    this.timers.add(timer);
    res.once('close', () => {
      clearInterval(timer);
      this.timers.delete(timer);
    });
  }

  async close(): Promise<void> {
    for (const t of this.timers) clearInterval(t);
    this.timers.clear();
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
