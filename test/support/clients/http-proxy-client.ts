/**
 * Plain (absolute-URI) requests through the HTTP proxy listener with node:http, so a test can
 * hold one keep-alive connection (an Agent with keepAlive and maxSockets 1) across requests and
 * see which TCP connection each request went over.
 */
import http from 'node:http';
import type net from 'node:net';

export interface ProxyCredentialPair {
  username: string;
  password: string;
}

export interface HttpProxyGetOptions {
  proxyPort: number;
  url: string;
  /** Sent as Proxy-Authorization: Basic; null sends none. */
  credential: ProxyCredentialPair | null;
  /** Omit for a fresh connection per request (agent: false). */
  agent?: http.Agent;
  localAddress?: string;
  timeoutMs?: number;
}

export interface HttpProxyResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
  /** The client-side socket the request went over (identity shows connection reuse). */
  socket: net.Socket;
  /** Local port of that socket: equal ports on loopback mean the same TCP connection. */
  localPort: number;
  elapsedMs: number;
}

export class HttpProxyClientTimeoutError extends Error {
  constructor(readonly url: string, readonly timeoutMs: number) {
    super(`no response through the HTTP proxy for ${url} within ${timeoutMs} ms`);
    this.name = 'HttpProxyClientTimeoutError';
  }
}

export function basicProxyAuthorization(c: ProxyCredentialPair): string {
  return `Basic ${Buffer.from(`${c.username}:${c.password}`, 'utf8').toString('base64')}`;
}

export function httpProxyGet(o: HttpProxyGetOptions): Promise<HttpProxyResponse> {
  const target = new URL(o.url);
  const timeoutMs = o.timeoutMs ?? 20_000;
  const headers: Record<string, string> = { Host: target.host };
  if (o.credential !== null) headers['Proxy-Authorization'] = basicProxyAuthorization(o.credential);
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: '127.0.0.1',
      port: o.proxyPort,
      method: 'GET',
      path: target.href,
      headers,
      agent: o.agent ?? false,
      ...(o.localAddress ? { localAddress: o.localAddress } : {}),
    });
    req.setTimeout(timeoutMs, () => req.destroy(new HttpProxyClientTimeoutError(o.url, timeoutMs)));
    req.once('error', reject);
    req.once('response', (res) => {
      const socket = res.socket;
      const localPort = socket.localPort ?? 0;
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.once('error', reject);
      res.once('end', () => {
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: Buffer.concat(chunks).toString('utf8'),
          socket,
          localPort,
          elapsedMs: performance.now() - started,
        });
      });
    });
    req.end();
  });
}
