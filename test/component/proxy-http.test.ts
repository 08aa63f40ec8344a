/**
 * The HTTP proxy listener over real loopback sockets: curl and hand-written requests -> the
 * listener -> fake tor SocksPorts -> real local HTTP origins (IPv4 and IPv6).
 */
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import { startFakeSocksBackend, type FakeSocksBackend } from '../support/fakes/socks-backend.js';
import { FakeRouter, RecordingEvents, capturingLogger, grantedRoute } from '../support/fakes/proxy-parts.js';
import { HttpProxyServer } from '../../workers/proxy/http-proxy-server.js';
import { HTTP_MAX_HEAD_BYTES } from '../../workers/proxy/http-proxy-head.js';
import type { ProxyTimeouts } from '../../workers/proxy/proxy-timeouts.js';
import type { CredentialPolicy, RouteDecision, RouteRequest } from '../../workers/proxy/proxy-types.js';
import { waitFor } from '../support/waiting.js';

// --- fakes ------------------------------------------------------------------------------------

function granted(backend: FakeSocksBackend, instanceId: number, request: RouteRequest): RouteDecision {
  return grantedRoute(instanceId, backend, request.sessionKey);
}

const TOKEN = 'tp_0123456789abcdefghijkl';
const requiredCredentials: CredentialPolicy = { required: true, check: (_user, password) => (password === TOKEN ? { ok: true, credential: 'token:test' } : { ok: false }) };
const AUTH = `Proxy-Authorization: Basic ${Buffer.from(`alice:${TOKEN}`).toString('base64')}`;

function curl(args: string[], input?: Buffer): Promise<{ code: number; stdout: Buffer; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('curl', ['--silent', '--show-error', '--max-time', '15', ...args]);
    const out: Buffer[] = [];
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, stdout: Buffer.concat(out), stderr }));
    child.stdin.end(input ?? Buffer.alloc(0));
  });
}

// --- a raw HTTP client that reads responses by their framing -----------------------------------

interface RawResponse {
  status: number;
  headers: Map<string, string[]>;
  body: Buffer;
}

class RawHttpClient {
  private buffer = Buffer.alloc(0);
  private ended = false;
  private waiter: (() => void) | null = null;

  private constructor(readonly socket: net.Socket) {
    socket.on('data', (chunk: Buffer) => {
      this.buffer = Buffer.concat([this.buffer, chunk]);
      this.wake();
    });
    socket.on('end', () => {
      this.ended = true;
      this.wake();
    });
    socket.on('close', () => {
      this.ended = true;
      this.wake();
    });
    socket.on('error', () => undefined);
  }

  static async connect(port: number): Promise<RawHttpClient> {
    const socket = await new Promise<net.Socket>((resolve, reject) => {
      const s = net.connect({ host: '127.0.0.1', port }, () => resolve(s));
      s.once('error', reject);
    });
    return new RawHttpClient(socket);
  }

  get isEnded(): boolean {
    return this.ended;
  }

  private wake(): void {
    const waiter = this.waiter;
    this.waiter = null;
    waiter?.();
  }

  private async more(): Promise<void> {
    if (this.ended) throw new Error(`connection ended; buffered: ${JSON.stringify(this.buffer.toString('latin1'))}`);
    await new Promise<void>((resolve) => (this.waiter = resolve));
  }

  send(text: string | Buffer): void {
    this.socket.write(typeof text === 'string' ? Buffer.from(text, 'latin1') : text);
  }

  async closed(): Promise<void> {
    while (!this.ended) await new Promise<void>((resolve) => (this.waiter = resolve));
  }

  /** Reads one response; `head` true for a response to HEAD/CONNECT (no body expected). */
  async response(noBody = false): Promise<RawResponse> {
    let end: number;
    while ((end = this.buffer.indexOf('\r\n\r\n')) === -1) await this.more();
    const lines = this.buffer.toString('latin1', 0, end).split('\r\n');
    this.buffer = this.buffer.subarray(end + 4);
    const status = Number(lines[0]!.split(' ')[1]);
    const headers = new Map<string, string[]>();
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(':');
      const name = line.slice(0, colon).toLowerCase();
      headers.set(name, [...(headers.get(name) ?? []), line.slice(colon + 1).trim()]);
    }
    if (status < 200 && status !== 101) return this.response(noBody);
    if (noBody || status === 204 || status === 304) return { status, headers, body: Buffer.alloc(0) };
    const length = headers.get('content-length')?.[0];
    if (headers.get('transfer-encoding')?.[0]?.toLowerCase() === 'chunked') {
      const parts: Buffer[] = [];
      for (;;) {
        let lineEnd: number;
        while ((lineEnd = this.buffer.indexOf('\r\n')) === -1) await this.more();
        const size = parseInt(this.buffer.toString('latin1', 0, lineEnd), 16);
        this.buffer = this.buffer.subarray(lineEnd + 2);
        if (size === 0) {
          while ((lineEnd = this.buffer.indexOf('\r\n\r\n')) === -1 && !this.buffer.subarray(0, 2).equals(Buffer.from('\r\n'))) await this.more();
          this.buffer = this.buffer.subarray(this.buffer.subarray(0, 2).equals(Buffer.from('\r\n')) ? 2 : lineEnd + 4);
          return { status, headers, body: Buffer.concat(parts) };
        }
        while (this.buffer.length < size + 2) await this.more();
        parts.push(this.buffer.subarray(0, size));
        this.buffer = this.buffer.subarray(size + 2);
      }
    }
    if (length !== undefined) {
      while (this.buffer.length < Number(length)) await this.more();
      const body = this.buffer.subarray(0, Number(length));
      this.buffer = this.buffer.subarray(Number(length));
      return { status, headers, body };
    }
    await this.closed();
    const body = this.buffer;
    this.buffer = Buffer.alloc(0);
    return { status, headers, body };
  }

  async readAll(): Promise<Buffer> {
    await this.closed();
    const out = this.buffer;
    this.buffer = Buffer.alloc(0);
    return out;
  }
}

// --- origins ------------------------------------------------------------------------------------

interface OriginRequest {
  method: string;
  url: string;
  rawHeaders: string[];
  body: Buffer;
}

/** A real HTTP origin: /hello, /chunked (no length), /echo (returns the body). Records each request. */
function recordingOrigin(log: OriginRequest[]): http.Server {
  return http.createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (chunk: Buffer) => parts.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(parts);
      log.push({ method: req.method ?? '', url: req.url ?? '', rawHeaders: req.rawHeaders, body });
      if (req.url === '/chunked') {
        res.write('part one, ');
        res.end('part two');
      } else if (req.url === '/echo') {
        res.setHeader('Content-Length', body.length);
        res.end(body);
      } else {
        res.setHeader('Content-Length', 5);
        res.end('hello');
      }
    });
  });
}

/** A raw TCP origin that answers each connection with `response` after the request head (and closes if told). */
function rawOrigin(response: string | Buffer, received: Buffer[], closeAfter: boolean): net.Server {
  return net.createServer({ allowHalfOpen: true }, (socket) => {
    socket.on('error', () => undefined);
    let buffer = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
      if (buffer.indexOf('\r\n\r\n') !== -1 && buffer.length > 0) {
        received.push(buffer);
        buffer = Buffer.alloc(0);
        if (closeAfter) socket.end(response);
        else socket.write(response);
      }
    });
  });
}

function headerNames(rawHeaders: string[]): string[] {
  return rawHeaders.filter((_v, i) => i % 2 === 0).map((n) => n.toLowerCase());
}

// --- tests --------------------------------------------------------------------------------------

describe('proxy: HTTP proxy listener (component, real sockets)', function () {
  this.timeout(30_000);

  let backendA: FakeSocksBackend;
  let backendB: FakeSocksBackend;
  let router: FakeRouter;
  let events: RecordingEvents;
  let proxy: HttpProxyServer;
  let proxyUrl: string;
  let proxyPort: number;
  let log: ReturnType<typeof capturingLogger>;
  let originLog: OriginRequest[];
  let originPort: number;
  let origin6Port: number;
  const owned: Array<net.Server> = [];

  async function startProxy(timeouts?: Partial<ProxyTimeouts>, credentials: CredentialPolicy = requiredCredentials, exitHeader = false): Promise<void> {
    log = capturingLogger();
    proxy = new HttpProxyServer({ router, events, credentials, log: log.logger, exitHeader, ...(timeouts ? { timeouts } : {}) });
    proxyPort = (await proxy.listen(0)).port;
    proxyUrl = `http://127.0.0.1:${proxyPort}`;
  }

  async function serve(server: net.Server, host = '127.0.0.1'): Promise<number> {
    owned.push(server);
    await new Promise<void>((resolve) => server.listen(0, host, resolve));
    return (server.address() as net.AddressInfo).port;
  }

  beforeEach(async () => {
    backendA = await startFakeSocksBackend();
    backendB = await startFakeSocksBackend();
    router = new FakeRouter((request) => granted(backendA, 1, request));
    events = new RecordingEvents();
    originLog = [];
    originPort = await serve(recordingOrigin(originLog));
    origin6Port = await serve(recordingOrigin(originLog), '::1');
  });

  afterEach(async () => {
    await proxy?.close();
    await backendA.close();
    await backendB.close();
    for (const server of owned.splice(0)) {
      if (server instanceof http.Server) server.closeAllConnections();
      server.close();
    }
  });

  describe('plain requests', () => {
    it('forwards an absolute-URI GET through the instance, the name unresolved, the user part as session key', async () => {
      await startProxy();
      const result = await curl(['-x', proxyUrl, '--proxy-user', `alice:${TOKEN}`, `http://localhost:${originPort}/hello`]);
      expect(result.stderr).to.equal('');
      expect(result.stdout.toString()).to.equal('hello');
      expect(backendA.requests).to.have.length(1);
      expect(backendA.requests[0]).to.deep.include({ addressType: 'domain', host: 'localhost', port: originPort, methods: [0] });
      expect(router.requests).to.deep.equal([{ sessionKey: 'alice', clientIp: '127.0.0.1', listener: 'http' }]);
      expect(originLog[0]).to.deep.include({ method: 'GET', url: '/hello' });
      await waitFor('accounting', () => events.closed.length === 1);
      expect(events.closed[0]!.stats.ok).to.equal(true);
      expect(events.closed[0]!.listener).to.equal('http');
    });

    it('forwards a large POST body (Content-Length, with Expect: 100-continue) and relays the response intact', async () => {
      await startProxy();
      const body = randomBytes(3 * 1024 * 1024);
      const result = await curl(['-x', proxyUrl, '--proxy-user', `alice:${TOKEN}`, '--data-binary', '@-', `http://localhost:${originPort}/echo`], body);
      expect(result.stderr).to.equal('');
      expect(result.stdout.equals(body)).to.equal(true);
      expect(originLog[0]!.body.equals(body)).to.equal(true);
      expect(headerNames(originLog[0]!.rawHeaders)).to.include('expect');
    });

    it('forwards a chunked request body verbatim', async () => {
      await startProxy();
      const body = randomBytes(600 * 1024);
      const result = await curl(
        ['-x', proxyUrl, '--proxy-user', `alice:${TOKEN}`, '-H', 'Transfer-Encoding: chunked', '--data-binary', '@-', `http://localhost:${originPort}/echo`],
        body,
      );
      expect(result.stderr).to.equal('');
      expect(result.stdout.equals(body)).to.equal(true);
      const names = headerNames(originLog[0]!.rawHeaders);
      expect(names).to.include('transfer-encoding');
      expect(names).to.not.include('content-length');
    });

    it('routes and dials every request of a keep-alive connection on its own', async () => {
      router.decide = (request, index) => granted(index % 2 === 0 ? backendA : backendB, index % 2 === 0 ? 1 : 2, request);
      await startProxy();
      const client = await RawHttpClient.connect(proxyPort);
      client.send(`GET http://localhost:${originPort}/hello HTTP/1.1\r\nHost: localhost\r\n${AUTH}\r\n\r\n`);
      const first = await client.response();
      client.send(`GET http://localhost:${originPort}/chunked HTTP/1.1\r\nHost: localhost\r\n${AUTH}\r\n\r\n`);
      const second = await client.response();
      expect(first.body.toString()).to.equal('hello');
      expect(second.body.toString()).to.equal('part one, part two');
      expect(second.headers.get('transfer-encoding')).to.deep.equal(['chunked']);
      expect(router.requests).to.have.length(2);
      expect(backendA.requests.map((r) => r.port)).to.deep.equal([originPort]);
      expect(backendB.requests.map((r) => r.port)).to.deep.equal([originPort]);
      expect(client.isEnded).to.equal(false);
      await waitFor('accounting', () => events.closed.length === 2);
      expect(events.closed.map((c) => c.route.instance)).to.deep.equal([1, 2]);
      client.socket.destroy();
    });

    it('serves pipelined requests in order', async () => {
      await startProxy();
      const client = await RawHttpClient.connect(proxyPort);
      const request = (path: string): string => `GET http://localhost:${originPort}${path} HTTP/1.1\r\nHost: x\r\n${AUTH}\r\n\r\n`;
      client.send(request('/hello') + request('/chunked') + request('/hello'));
      expect((await client.response()).body.toString()).to.equal('hello');
      expect((await client.response()).body.toString()).to.equal('part one, part two');
      expect((await client.response()).body.toString()).to.equal('hello');
      client.socket.destroy();
    });

    it('lets curl reuse one proxy connection for two URLs, each request routed separately', async () => {
      await startProxy();
      const url = `http://localhost:${originPort}/hello`;
      const result = await curl(['-x', proxyUrl, '--proxy-user', `alice:${TOKEN}`, '-w', ' connects=%{num_connects}\\n', url, url]);
      expect(result.stdout.toString()).to.equal('hello connects=1\nhello connects=0\n');
      expect(router.requests).to.have.length(2);
      expect(backendA.requests).to.have.length(2);
    });

    it('reaches a bracketed IPv6 destination', async () => {
      await startProxy();
      const result = await curl(['-x', proxyUrl, '--proxy-user', `alice:${TOKEN}`, `http://[::1]:${origin6Port}/hello`]);
      expect(result.stdout.toString()).to.equal('hello');
      expect(backendA.requests[0]).to.deep.include({ addressType: 'ipv6', port: origin6Port });
      const hostHeader = originLog[0]!.rawHeaders[originLog[0]!.rawHeaders.findIndex((v, i) => i % 2 === 0 && v.toLowerCase() === 'host') + 1];
      expect(hostHeader).to.equal(`[::1]:${origin6Port}`);
    });

    it('strips hop-by-hop fields and the credential in both directions, and rewrites Host', async () => {
      const received: Buffer[] = [];
      const originResponse =
        'HTTP/1.1 200 OK\r\nConnection: X-Hop\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\nProxy-Authenticate: Basic\r\nUpgrade: h2c\r\nX-End-To-End: yes\r\nContent-Length: 2\r\n\r\nok';
      const rawPort = await serve(rawOrigin(originResponse, received, true));
      await startProxy();
      const client = await RawHttpClient.connect(proxyPort);
      client.send(
        [
          `GET http://localhost:${rawPort}/path?q=1 HTTP/1.1`,
          'Host: wrong.example',
          AUTH,
          'Connection: keep-alive, X-Private',
          'X-Private: secret',
          'Proxy-Connection: keep-alive',
          'Keep-Alive: 300',
          'TE: trailers',
          'Upgrade: websocket',
          'X-Custom: kept',
          '',
          '',
        ].join('\r\n'),
      );
      const response = await client.response();
      expect(response.body.toString()).to.equal('ok');
      expect([...response.headers.keys()]).to.deep.equal(['x-end-to-end', 'content-length']);
      const forwarded = received[0]!.toString('latin1');
      expect(forwarded).to.equal(`GET /path?q=1 HTTP/1.1\r\nHost: localhost:${rawPort}\r\nX-Custom: kept\r\nConnection: close\r\n\r\n`);
      await waitFor('accounting', () => events.closed.length === 1);
      expect(events.closed[0]!.stats).to.include({ bytesUp: received[0]!.length, bytesDown: originResponse.length, ok: true });
      expect(events.closed[0]!.stats.evidence.host).to.equal('localhost');
      expect(events.closed[0]!.stats.evidence.credential(), 'the token that opened it').to.equal('token:test');
      client.socket.destroy();
    });

    it('relays a close-delimited response and closes the client connection after it', async () => {
      const rawPort = await serve(rawOrigin('HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end', [], true));
      await startProxy();
      const client = await RawHttpClient.connect(proxyPort);
      client.send(`GET http://127.0.0.1:${rawPort}/ HTTP/1.1\r\n${AUTH}\r\n\r\n`);
      const response = await client.response();
      expect(response.headers.get('connection')).to.deep.equal(['close']);
      expect(response.body.toString()).to.equal('until the end');
      await client.closed();
    });

    it('answers HEAD without waiting for a body', async () => {
      await startProxy();
      const result = await curl(['-x', proxyUrl, '--proxy-user', `alice:${TOKEN}`, '-I', '-w', '%{http_code}', `http://localhost:${originPort}/hello`]);
      expect(result.stderr).to.equal('');
      expect(result.stdout.toString()).to.match(/^HTTP\/1\.1 200 OK\r\n[\s\S]*content-length: 5\r\n[\s\S]*\r\n\r\n200$/i);
      expect(originLog[0]!.method).to.equal('HEAD');
    });

    it('resets the client when the upstream breaks mid-response, and records a scored reset', async () => {
      const breaking = net.createServer((socket) => {
        socket.on('error', () => undefined);
        socket.once('data', () => {
          socket.write('HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\npartial');
          setTimeout(() => socket.resetAndDestroy(), 50);
        });
      });
      const port = await serve(breaking);
      await startProxy();
      const client = await RawHttpClient.connect(proxyPort);
      const errors: string[] = [];
      client.socket.on('error', (error: NodeJS.ErrnoException) => errors.push(error.code ?? ''));
      client.send(`GET http://127.0.0.1:${port}/ HTTP/1.1\r\n${AUTH}\r\n\r\n`);
      const received = await client.readAll();
      expect(received.toString('latin1')).to.match(/^HTTP\/1\.1 200 OK\r\n[\s\S]*partial$/);
      expect(errors).to.deep.equal(['ECONNRESET']);
      await waitFor('accounting', () => events.closed.length === 1);
      expect(events.closed[0]!.stats.failure).to.deep.equal({ kind: 'reset', scored: true });
    });

    it('drops the upstream when the client goes away mid-download, without blaming the instance', async () => {
      let upstreamClosed = false;
      const endless = net.createServer((socket) => {
        socket.on('error', () => undefined);
        socket.on('close', () => (upstreamClosed = true));
        socket.once('data', () => {
          socket.write('HTTP/1.1 200 OK\r\nContent-Length: 1000000000\r\n\r\n');
          const chunk = Buffer.alloc(64 * 1024);
          const pump = (): void => {
            while (!socket.destroyed && socket.write(chunk));
            if (!socket.destroyed) socket.once('drain', pump);
          };
          pump();
        });
      });
      const port = await serve(endless);
      await startProxy();
      const client = await RawHttpClient.connect(proxyPort);
      client.send(`GET http://127.0.0.1:${port}/ HTTP/1.1\r\n${AUTH}\r\n\r\n`);
      await new Promise((resolve) => setTimeout(resolve, 100));
      client.socket.destroy();
      await waitFor('accounting', () => events.closed.length === 1);
      expect(events.closed[0]!.stats.ok).to.equal(true);
      expect(events.closed[0]!.stats.bytesDown).to.be.greaterThan(0);
      await waitFor('upstream closed', () => upstreamClosed);
      await waitFor('release', () => proxy.connectionCount === 0);
    });

    it('answers 504 with Proxy-Status when the destination never answers', async () => {
      const silentPort = await serve(net.createServer((socket) => socket.on('error', () => undefined)));
      await startProxy({ relayIdleMs: 300 });
      const client = await RawHttpClient.connect(proxyPort);
      client.send(`GET http://127.0.0.1:${silentPort}/ HTTP/1.1\r\n${AUTH}\r\n\r\n`);
      const response = await client.response();
      expect(response.status).to.equal(504);
      expect(response.headers.get('proxy-status')?.[0]).to.match(/^exitpool; error=http_response_timeout/);
      client.socket.destroy();
    });
  });

  describe('CONNECT', () => {
    it('tunnels curl through the instance (proxytunnel)', async () => {
      await startProxy();
      const result = await curl(['-p', '-x', proxyUrl, '--proxy-user', `alice:${TOKEN}`, `http://localhost:${originPort}/hello`]);
      expect(result.stderr).to.equal('');
      expect(result.stdout.toString()).to.equal('hello');
      expect(backendA.requests[0]).to.deep.include({ addressType: 'domain', host: 'localhost', port: originPort });
      // Inside a tunnel the origin sees curl's own request, without the Connection: close a forwarded request gets.
      expect(headerNames(originLog[0]!.rawHeaders)).to.not.include('connection');
    });

    it('tunnels to a bracketed IPv6 authority', async () => {
      await startProxy();
      const result = await curl(['-p', '-x', proxyUrl, '--proxy-user', `alice:${TOKEN}`, `http://[::1]:${origin6Port}/hello`]);
      expect(result.stdout.toString()).to.equal('hello');
      expect(backendA.requests[0]).to.deep.include({ addressType: 'ipv6', port: origin6Port });
    });

    it('relays raw bytes exactly, including bytes sent right behind the CONNECT head, with exact accounting', async () => {
      const echoPort = await serve(net.createServer({ allowHalfOpen: true }, (socket) => socket.pipe(socket)));
      await startProxy();
      const client = await RawHttpClient.connect(proxyPort);
      const payload = randomBytes(4 * 1024 * 1024);
      client.send(Buffer.concat([Buffer.from(`CONNECT 127.0.0.1:${echoPort} HTTP/1.1\r\n${AUTH}\r\n\r\n`), payload.subarray(0, 1000)]));
      const established = await client.response(true);
      expect(established.status).to.equal(200);
      client.socket.end(payload.subarray(1000));
      const echoed = await client.readAll();
      expect(echoed.equals(payload)).to.equal(true);
      await waitFor('accounting', () => events.closed.length === 1);
      expect(events.closed[0]!.stats).to.include({ bytesUp: payload.length, bytesDown: payload.length, ok: true });
    });
  });

  describe('EXIT_HEADER', () => {
    it('names the exit on plain responses and the CONNECT reply only when on, and only when the exit is known', async () => {
      router.decide = (request, index) => ({ ...granted(backendA, 1, request), exitIp: index === 2 ? '' : '203.0.113.7' });
      await startProxy(undefined, requiredCredentials, true);
      const client = await RawHttpClient.connect(proxyPort);
      client.send(`GET http://localhost:${originPort}/hello HTTP/1.1\r\nHost: localhost\r\n${AUTH}\r\n\r\n`);
      const plain = await client.response();
      expect(plain.status).to.equal(200);
      expect(plain.headers.get('exitpool-exit')).to.deep.equal(['203.0.113.7']);
      expect(plain.body.toString()).to.equal('hello');
      client.socket.destroy();
      const tunnel = await RawHttpClient.connect(proxyPort);
      tunnel.send(`CONNECT localhost:${originPort} HTTP/1.1\r\n${AUTH}\r\n\r\n`);
      const established = await tunnel.response(true);
      expect(established.status).to.equal(200);
      expect(established.headers.get('exitpool-exit')).to.deep.equal(['203.0.113.7']);
      tunnel.socket.destroy();
      const unknown = await curl(['-i', '-x', proxyUrl, '--proxy-user', `alice:${TOKEN}`, `http://localhost:${originPort}/hello`]);
      expect(router.requests, 'the third request got the route without an exit').to.have.length(3);
      expect(unknown.stdout.toString()).to.match(/^HTTP\/1\.1 200 /m);
      expect(unknown.stdout.toString().toLowerCase()).to.not.contain('exitpool-exit');
    });

    it('leaves responses as the destination sent them when off', async () => {
      router.decide = (request) => ({ ...granted(backendA, 1, request), exitIp: '203.0.113.7' });
      await startProxy();
      const result = await curl(['-i', '-x', proxyUrl, '--proxy-user', `alice:${TOKEN}`, `http://localhost:${originPort}/hello`]);
      expect(result.stdout.toString().toLowerCase()).to.not.contain('exitpool-exit');
      const tunnelled = await curl(['-i', '-p', '-x', proxyUrl, '--proxy-user', `alice:${TOKEN}`, `http://localhost:${originPort}/hello`]);
      expect(tunnelled.stdout.toString().toLowerCase()).to.not.contain('exitpool-exit');
    });
  });

  describe('refusals and errors', () => {
    it('answers 407 with a Basic challenge and keeps the connection for the retry', async () => {
      await startProxy();
      const client = await RawHttpClient.connect(proxyPort);
      client.send(`GET http://localhost:${originPort}/hello HTTP/1.1\r\nHost: localhost\r\n\r\n`);
      const challenge = await client.response();
      expect(challenge.status).to.equal(407);
      expect(challenge.headers.get('proxy-authenticate')).to.deep.equal(['Basic realm="exitpool"']);
      expect(challenge.headers.get('proxy-status')?.[0]).to.match(/^exitpool; error=http_request_denied/);
      expect(challenge.headers.get('content-type')?.[0]).to.match(/^text\/plain/);
      client.send(`GET http://localhost:${originPort}/hello HTTP/1.1\r\nHost: localhost\r\nProxy-Authorization: Basic ${Buffer.from('alice:tp_wrong').toString('base64')}\r\n\r\n`);
      expect((await client.response()).status).to.equal(407);
      client.send(`GET http://localhost:${originPort}/hello HTTP/1.1\r\nHost: localhost\r\n${AUTH}\r\n\r\n`);
      expect((await client.response()).body.toString()).to.equal('hello');
      expect(router.requests).to.have.length(1);
      const refusals = log.lines.filter((l) => l.message === 'credential refused');
      // The first refusal is written at once; the second falls in the same interval and is counted for the next line.
      expect(refusals.map((l) => [l.level, l.reason, l.occurrences])).to.deep.equal([['warn', 'missing', 1]]);
      expect(JSON.stringify(log.lines)).to.not.include('tp_wrong');
      client.socket.destroy();
    });

    it('answers 407 to a POST whose body is still arriving, and the client reads it before the close', async () => {
      await startProxy();
      const client = await RawHttpClient.connect(proxyPort);
      const body = randomBytes(256 * 1024);
      client.send(`POST http://localhost:${originPort}/echo HTTP/1.1\r\nContent-Length: ${body.length}\r\n\r\n`);
      client.send(body);
      const response = await client.response();
      expect(response.status).to.equal(407);
      expect(response.headers.get('connection')).to.deep.equal(['close']);
      await client.closed();
      expect(originLog).to.have.length(0);
    });

    it('answers curl without credentials with 407', async () => {
      await startProxy();
      const result = await curl(['-x', proxyUrl, '-o', '/dev/null', '-w', '%{http_code}', `http://localhost:${originPort}/hello`]);
      expect(result.stdout.toString()).to.equal('407');
    });

    it('works without credentials under AUTH_DISABLED, with a sent user part still the session key', async () => {
      await startProxy(undefined, { required: false, check: () => ({ ok: false }) });
      const anonymous = await curl(['-x', proxyUrl, `http://localhost:${originPort}/hello`]);
      const named = await curl(['-x', proxyUrl, '--proxy-user', 'bob:anything', `http://localhost:${originPort}/hello`]);
      expect([anonymous.stdout.toString(), named.stdout.toString()]).to.deep.equal(['hello', 'hello']);
      expect(router.requests.map((r) => r.sessionKey)).to.deep.equal([null, 'bob']);
    });

    it('answers 503 at once with Proxy-Status when no instance can serve', async () => {
      router.decide = () => ({ ok: false, reason: 'no_routable_instance' });
      await startProxy();
      const client = await RawHttpClient.connect(proxyPort);
      client.send(`GET http://localhost:${originPort}/hello HTTP/1.1\r\n${AUTH}\r\n\r\n`);
      const response = await client.response();
      expect(response.status).to.equal(503);
      // Refused from the route alone: no dial was opened, so there was no deadline to wait for.
      expect(events.opened).to.have.length(0);
      expect(response.headers.get('proxy-status')?.[0]).to.match(/^exitpool; error=destination_unavailable/);
      expect(response.body.toString()).to.equal('no instance can serve this request\n');
      client.send(`CONNECT localhost:${originPort} HTTP/1.1\r\n${AUTH}\r\n\r\n`);
      expect((await client.response(true)).status).to.equal(503);
      expect(backendA.requests).to.have.length(0);
      expect(events.opened).to.have.length(0);
      client.socket.destroy();
    });

    it('answers 503 with the reason in Proxy-Status when no exit in the countries asked for served in time, on plain requests and CONNECT', async () => {
      const detail = 'an exit in jp was assigned but did not serve within 15 s; retry';
      router.decide = () => ({ ok: false, reason: 'country_wait_timeout', detail });
      await startProxy();
      const client = await RawHttpClient.connect(proxyPort);
      client.send(`GET http://localhost:${originPort}/hello HTTP/1.1\r\n${AUTH}\r\n\r\n`);
      const response = await client.response();
      expect(response.status).to.equal(503);
      expect(response.headers.get('proxy-status')?.[0]).to.equal(`exitpool; error=destination_unavailable; details="${detail}"`);
      expect(response.body.toString()).to.equal(`${detail}\n`);
      client.send(`CONNECT localhost:${originPort} HTTP/1.1\r\n${AUTH}\r\n\r\n`);
      const tunnel = await client.response(true);
      expect(tunnel.status).to.equal(503);
      expect(tunnel.headers.get('proxy-status')?.[0]).to.equal(`exitpool; error=destination_unavailable; details="${detail}"`);
      expect(backendA.requests).to.have.length(0);
      expect(events.opened).to.have.length(0);
      client.socket.destroy();
    });

    it("maps tor's refusals to 502/504 with precise Proxy-Status error types", async () => {
      await startProxy({ dialMs: 300 });
      const statusOf = async (url: string): Promise<[number, string]> => {
        const client = await RawHttpClient.connect(proxyPort);
        client.send(`GET ${url} HTTP/1.1\r\n${AUTH}\r\n\r\n`);
        const response = await client.response();
        client.socket.destroy();
        return [response.status, /error=([a-z_]+)/.exec(response.headers.get('proxy-status')?.[0] ?? '')?.[1] ?? ''];
      };
      expect(await statusOf('http://no-such-host.example/')).to.deep.equal([502, 'dns_error']);
      backendA.refuseWith = 5;
      expect(await statusOf('http://93.184.216.34/')).to.deep.equal([502, 'connection_refused']);
      backendA.refuseWith = 2;
      expect(await statusOf('http://10.0.0.1/')).to.deep.equal([502, 'destination_ip_prohibited']);
      backendA.refuseWith = 1;
      expect(await statusOf('http://example.com/')).to.deep.equal([502, 'destination_unavailable']);
      backendA.refuseWith = null;
      backendA.silent = true;
      expect(await statusOf('http://example.com/')).to.deep.equal([504, 'connection_timeout']);
      await waitFor('accounting', () => events.closed.length === 5);
      expect(events.closed.map((c) => c.stats.failure)).to.deep.equal([
        { kind: 'socks_refused', socksReply: 4, scored: true, destination: 'no-such-host.example:80' },
        { kind: 'socks_refused', socksReply: 5, scored: true, destination: '93.184.216.34:80' },
        { kind: 'socks_refused', socksReply: 2, scored: false },
        // Every refusal and a CONNECT tor never answered name the destination: the supervisor judges whose fault they were.
        { kind: 'socks_refused', socksReply: 1, scored: true, destination: 'example.com:80' },
        { kind: 'timeout', scored: true, destination: 'example.com:80' },
      ]);
    });

    it('answers 431 to an oversized head and closes', async () => {
      await startProxy();
      const client = await RawHttpClient.connect(proxyPort);
      client.send(`GET http://localhost:${originPort}/ HTTP/1.1\r\n${AUTH}\r\nX-Big: ${'b'.repeat(HTTP_MAX_HEAD_BYTES)}\r\n\r\n`);
      const response = await client.response();
      expect(response.status).to.equal(431);
      expect(response.headers.get('proxy-status')?.[0]).to.match(/^exitpool; error=http_request_error/);
      await client.closed();
      expect(router.requests).to.have.length(0);
    });

    it('answers 400 to a malformed request and to smuggling-prone framing', async () => {
      await startProxy();
      for (const request of [
        `GET /relative HTTP/1.1\r\n${AUTH}\r\n\r\n`,
        `POST http://localhost:${originPort}/ HTTP/1.1\r\n${AUTH}\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n`,
        `GET http://localhost:${originPort}/ HTTP/1.1\r\n${AUTH}\r\nX:  folded\r\n  line\r\n\r\n`,
      ]) {
        const client = await RawHttpClient.connect(proxyPort);
        client.send(request);
        const response = await client.response();
        expect(response.status, request).to.equal(400);
        expect(response.headers.get('proxy-status')?.[0]).to.match(/^exitpool; error=http_request_error/);
        await client.closed();
      }
      expect(router.requests).to.have.length(0);
    });

    it('answers 408 and closes when a head does not arrive in time', async () => {
      await startProxy({ httpHeadMs: 300 });
      const client = await RawHttpClient.connect(proxyPort);
      client.send('GET http://localhost/ HTTP/1.1\r\nX-Slow: ');
      const response = await client.response();
      expect(response.status).to.equal(408);
      await client.closed();
    });

    it('closes an idle keep-alive connection quietly', async () => {
      await startProxy({ httpKeepAliveIdleMs: 300 });
      const client = await RawHttpClient.connect(proxyPort);
      client.send(`GET http://localhost:${originPort}/hello HTTP/1.1\r\n${AUTH}\r\n\r\n`);
      expect((await client.response()).status).to.equal(200);
      expect((await client.readAll()).length).to.equal(0);
      await waitFor('release', () => proxy.connectionCount === 0);
    });
  });
});
