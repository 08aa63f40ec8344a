import { request, type IncomingMessage } from 'node:http';
import { isIP, type Socket } from 'node:net';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import type { EgressFetch, EgressFetchFailure, EgressFetchResult } from '../../shared/ipc/protocol.js';
import { errorMessage } from '../../shared/errors/error-message.js';
import { dialSocks5, SocksDialError } from './socks5-client.js';
import { targetFromHost } from './socks5-protocol.js';

/**
 * One GET through the instance the supervisor names (`egress.fetch`): an exit's egress probe (an
 * IP-echo endpoint answers the address the request came from) or the Tor exit list. The URL's
 * host is resolved by the exit (SOCKS5 with a domain), so nothing about it is looked up here; an
 * https: URL is checked against Node's certificate authorities, so an exit cannot answer in the
 * echo service's place. No header names the pool: `Host`, `Accept`, `Connection: close` only.
 * Node's HTTP client reads the answer over the SOCKS-dialled (and TLS-wrapped) socket.
 */
export async function fetchThroughInstance(f: EgressFetch): Promise<EgressFetchResult> {
  const startedAt = performance.now();
  let url: URL;
  try {
    url = new URL(f.url);
  } catch {
    return failed('url', `not a URL: ${JSON.stringify(f.url.slice(0, 200))}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return failed('url', `${url.protocol} is neither http: nor https:`);
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  const port = url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port);
  const left = (): number => Math.max(1, f.timeoutMs - (performance.now() - startedAt));
  let socket: Socket;
  try {
    socket = (await dialSocks5({ ...f.socks, target: targetFromHost(host, port), timeoutMs: f.timeoutMs })).socket;
  } catch (error) {
    if (error instanceof SocksDialError) {
      if (error.kind === 'refused') return failed('socks', error.message, { socksReply: error.replyCode });
      if (error.kind === 'timeout') return failed('timeout', `tor did not connect within ${f.timeoutMs} ms`);
      if (error.kind === 'connect') return failed('dial', error.message);
      return failed('socks', error.message);
    }
    return failed('dial', errorMessage(error));
  }
  // The dial leaves the socket paused; HTTP and TLS clients speak first, so nothing is lost by reading on.
  socket.resume();
  let stream: Socket | TLSSocket = socket;
  try {
    if (url.protocol === 'https:') stream = await secure(socket, host, left());
    return await get(stream, url, f.maxBytes, left());
  } catch (error) {
    if (error instanceof FetchFailure) return failed(error.failure, error.message, { status: error.status });
    return failed('broken', errorMessage(error));
  } finally {
    stream.destroy();
    socket.destroy();
  }
}

class FetchFailure extends Error {
  constructor(
    readonly failure: EgressFetchFailure,
    message: string,
    readonly status: number | null = null,
  ) {
    super(message);
    this.name = 'FetchFailure';
  }
}

function failed(failure: EgressFetchFailure, detail: string, extra: { socksReply?: number | null; status?: number | null } = {}): EgressFetchResult {
  return { ok: false, failure, socksReply: extra.socksReply ?? null, status: extra.status ?? null, detail };
}

/** TLS over the tunnel, the server's certificate checked for `host`. */
function secure(socket: Socket, host: string, timeoutMs: number): Promise<TLSSocket> {
  return new Promise((resolve, reject) => {
    const tls = tlsConnect({ socket, ...(isIP(host) === 0 ? { servername: host } : {}), host, ALPNProtocols: ['http/1.1'] });
    const timer = setTimeout(() => {
      tls.destroy();
      reject(new FetchFailure('timeout', `no TLS handshake within ${timeoutMs} ms`));
    }, timeoutMs);
    tls.once('secureConnect', () => {
      clearTimeout(timer);
      resolve(tls);
    });
    tls.once('error', (error) => {
      clearTimeout(timer);
      reject(new FetchFailure('tls', errorMessage(error)));
    });
  });
}

/** GET `url` over `stream`; the body when the status is 2xx and it fits in `maxBytes`. */
function get(stream: Socket | TLSSocket, url: URL, maxBytes: number, timeoutMs: number): Promise<EgressFetchResult> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      settle(() => reject(new FetchFailure('timeout', `no whole answer within ${Math.round(timeoutMs)} ms`)));
      req.destroy();
    }, timeoutMs);
    let settled = false;
    // The first outcome stands: destroying the answer afterwards emits errors of its own.
    const settle = (outcome: () => void): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      outcome();
    };
    const req = request({
      createConnection: () => stream,
      method: 'GET',
      path: `${url.pathname}${url.search}`,
      headers: { Host: url.host, Accept: 'text/plain, application/json;q=0.9, */*;q=0.1', Connection: 'close' },
    });
    req.on('response', (res: IncomingMessage) => {
      const status = res.statusCode ?? 0;
      if (status < 200 || status > 299) {
        settle(() => reject(new FetchFailure('http', `answered ${status}`, status)));
        res.destroy();
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > maxBytes) {
          settle(() => reject(new FetchFailure('too_large', `the answer is longer than ${maxBytes} bytes`)));
          res.destroy();
          return;
        }
        chunks.push(chunk);
      });
      res.on('end', () => settle(() => resolve({ ok: true, status, body: Buffer.concat(chunks).toString('utf8') })));
      res.on('error', (error) => settle(() => reject(new FetchFailure('broken', errorMessage(error)))));
      res.on('aborted', () => settle(() => reject(new FetchFailure('broken', 'the connection ended before the answer did'))));
    });
    req.on('error', (error) => settle(() => reject(new FetchFailure('broken', errorMessage(error)))));
    req.end();
  });
}
