/**
 * Background traffic for the fault tests: one loop per session key, each sending requests back
 * to back and alternating between the SOCKS5 and the HTTP proxy listener, recording when each
 * request started and ended and how it ended. A fault test starts the loops, strikes, stops
 * them, and judges the records (which failed, and whether they were in flight at the fault).
 */
import http from 'node:http';
import { httpGetOverTunnel, openSocksTunnel } from '../clients/socks5-client.js';

export type Listener = 'socks' | 'http';

export interface RequestRecord {
  key: string;
  listener: Listener;
  /** Date.now() at the start and at the end of the request. */
  startedAt: number;
  endedAt: number;
  ok: boolean;
  /** The response body on success (the whoami server answers with the exit address). */
  body: string;
  error: string;
}

export interface ProxyEndpoints {
  socksPort: number;
  httpPort: number;
  token: string;
}

/** One GET through the SOCKS5 listener; never throws, the record says how it went. */
export async function socksRequest(p: ProxyEndpoints, key: string, url: string, timeoutMs: number): Promise<RequestRecord> {
  const u = new URL(url);
  const startedAt = Date.now();
  const base = { key, listener: 'socks' as const, startedAt };
  const outcome = await openSocksTunnel({
    port: p.socksPort,
    username: key,
    password: p.token,
    host: u.hostname,
    targetPort: Number(u.port || 80),
    timeoutMs,
  });
  if (outcome.kind !== 'open') {
    const code = outcome.kind === 'refused' ? ` ${outcome.code}` : '';
    return { ...base, endedAt: Date.now(), ok: false, body: '', error: `socks ${outcome.kind} at ${outcome.step}${code}` };
  }
  try {
    const r = await httpGetOverTunnel(outcome.socket, u.host, u.pathname + u.search, timeoutMs);
    const ok = r.status === 200;
    return { ...base, endedAt: Date.now(), ok, body: r.body, error: ok ? '' : `status ${r.status}` };
  } catch (e) {
    return { ...base, endedAt: Date.now(), ok: false, body: '', error: (e as Error).message };
  }
}

/** One absolute-form GET through the HTTP proxy listener on a fresh connection; never throws. */
export function httpProxyRequest(p: ProxyEndpoints, key: string, url: string, timeoutMs: number): Promise<RequestRecord> {
  const u = new URL(url);
  const startedAt = Date.now();
  const base = { key, listener: 'http' as const, startedAt };
  return new Promise((resolve) => {
    let settled = false;
    const settle = (r: Omit<RequestRecord, 'key' | 'listener' | 'startedAt'>): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ ...base, ...r });
    };
    const req = http.request({
      host: '127.0.0.1',
      port: p.httpPort,
      method: 'GET',
      path: u.href,
      agent: false,
      headers: {
        Host: u.host,
        Connection: 'close',
        'Proxy-Authorization': `Basic ${Buffer.from(`${key}:${p.token}`, 'utf8').toString('base64')}`,
      },
    });
    const timer = setTimeout(() => {
      req.destroy();
      settle({ endedAt: Date.now(), ok: false, body: '', error: `no answer within ${timeoutMs} ms` });
    }, timeoutMs);
    req.on('error', (e) => settle({ endedAt: Date.now(), ok: false, body: '', error: e.message }));
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', (e) => settle({ endedAt: Date.now(), ok: false, body: '', error: e.message }));
      res.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        const ok = res.statusCode === 200;
        settle({ endedAt: Date.now(), ok, body, error: ok ? '' : `status ${res.statusCode} ${body.trim()}` });
      });
    });
    req.end();
  });
}

/** Loops over keys, each key sending one request at a time until stop(). */
export class TrafficLoops {
  readonly records: RequestRecord[] = [];
  private running = false;
  private loops: Promise<void>[] = [];

  constructor(
    private readonly proxy: ProxyEndpoints,
    private readonly keys: readonly string[],
    private readonly url: string,
    private readonly timeoutMs = 30_000,
  ) {}

  start(): void {
    this.running = true;
    this.loops = this.keys.map((key, i) => this.loop(key, i % 2 === 0 ? 'socks' : 'http'));
  }

  private async loop(key: string, first: Listener): Promise<void> {
    let listener = first;
    while (this.running) {
      const r =
        listener === 'socks'
          ? await socksRequest(this.proxy, key, this.url, this.timeoutMs)
          : await httpProxyRequest(this.proxy, key, this.url, this.timeoutMs);
      this.records.push(r);
      listener = listener === 'socks' ? 'http' : 'socks';
      // A refused request comes back at once; do not spin while the service recovers.
      if (!r.ok) await new Promise((res) => setTimeout(res, 50));
    }
  }

  /** Stops starting requests and waits for the ones in flight. */
  async stop(): Promise<RequestRecord[]> {
    this.running = false;
    await Promise.all(this.loops);
    return this.records;
  }
}
