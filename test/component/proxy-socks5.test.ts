/**
 * The SOCKS5 listener over real loopback sockets: real clients (curl and hand-written byte
 * sequences) -> the listener -> a fake tor SocksPort -> real local destinations.
 */
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import { startFakeSocksBackend, type FakeSocksBackend } from '../support/fakes/socks-backend.js';
import { ROUTINGS, fakeRouter, type FakeRouter, RecordingEvents, capturingLogger, grantedRoute } from '../support/fakes/proxy-parts.js';
import type { CredentialPolicy, RouteDecision, RouteRequest } from '../../workers/proxy/proxy-types.js';
import { Socks5ProxyServer, createSessionPortServer } from '../../workers/proxy/socks5-server.js';
import type { ProxyTimeouts } from '../../workers/proxy/proxy-timeouts.js';
import { waitFor } from '../support/waiting.js';

// --- fakes ------------------------------------------------------------------------------------

function routeTo(backend: FakeSocksBackend, instanceId = 1): (request: RouteRequest) => RouteDecision {
  return (request) => grantedRoute(instanceId, backend, request.sessionKey ?? `ip:${request.clientIp}`);
}

const TOKEN = 'tp_0123456789abcdefghijkl';
const requiredCredentials: CredentialPolicy = { required: true, check: (_user, password) => (password === TOKEN ? { ok: true, credential: 'token:test' } : { ok: false }) };
const noCredentials: CredentialPolicy = { required: false, check: () => ({ ok: false }) };

function curl(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('curl', ['--silent', '--show-error', '--max-time', '10', ...args], { encoding: 'utf8' }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === 'number' ? error.code : -1;
      resolve({ code, stdout, stderr });
    });
  });
}

// --- a raw SOCKS5 client ------------------------------------------------------------------------

/** Reads exactly n bytes (or fewer if the socket ends first). */
class ByteReader {
  private buffer = Buffer.alloc(0);
  private ended = false;
  private waiter: (() => void) | null = null;
  constructor(readonly socket: net.Socket) {
    socket.on('data', (chunk: Buffer) => {
      this.buffer = Buffer.concat([this.buffer, chunk]);
      this.waiter?.();
    });
    socket.on('end', () => {
      this.ended = true;
      this.waiter?.();
    });
    socket.on('close', () => {
      this.ended = true;
      this.waiter?.();
    });
    socket.on('error', () => undefined);
  }
  async read(n: number): Promise<Buffer> {
    while (this.buffer.length < n && !this.ended) await new Promise<void>((resolve) => (this.waiter = resolve));
    this.waiter = null;
    const out = this.buffer.subarray(0, n);
    this.buffer = this.buffer.subarray(out.length);
    return out;
  }
  async readAll(): Promise<Buffer> {
    while (!this.ended) await new Promise<void>((resolve) => (this.waiter = resolve));
    const out = this.buffer;
    this.buffer = Buffer.alloc(0);
    return out;
  }
  async closed(): Promise<void> {
    while (!this.ended) await new Promise<void>((resolve) => (this.waiter = resolve));
  }
}

function connect(port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port, allowHalfOpen: true }, () => resolve(socket));
    socket.once('error', reject);
  });
}

function userPass(user: string, password: string): Buffer {
  const u = Buffer.from(user);
  const p = Buffer.from(password);
  return Buffer.concat([Buffer.from([1, u.length]), u, Buffer.from([p.length]), p]);
}

function connectRequest(target: { ipv4?: string; ipv6?: Buffer; domain?: string }, port: number, command = 1): Buffer {
  let address: Buffer;
  if (target.ipv4 !== undefined) address = Buffer.from([1, ...target.ipv4.split('.').map(Number)]);
  else if (target.ipv6 !== undefined) address = Buffer.concat([Buffer.from([4]), target.ipv6]);
  else address = Buffer.concat([Buffer.from([3, target.domain!.length]), Buffer.from(target.domain!)]);
  const portBytes = Buffer.alloc(2);
  portBytes.writeUInt16BE(port);
  return Buffer.concat([Buffer.from([5, command, 0]), address, portBytes]);
}

/** Greeting + credentials + CONNECT; returns the reader positioned after the 10-byte reply, and the reply code. */
async function socksConnect(
  proxyPort: number,
  target: Parameters<typeof connectRequest>[0],
  port: number,
  credentials: [string, string] | null = ['alice', TOKEN],
): Promise<{ socket: net.Socket; reader: ByteReader; reply: number }> {
  const socket = await connect(proxyPort);
  const reader = new ByteReader(socket);
  socket.write(Buffer.from(credentials === null ? [5, 1, 0] : [5, 1, 2]));
  const selection = await reader.read(2);
  if (credentials !== null) {
    expect([...selection]).to.deep.equal([5, 2]);
    socket.write(userPass(...credentials));
    expect([...(await reader.read(2))]).to.deep.equal([1, 0]);
  } else {
    expect([...selection]).to.deep.equal([5, 0]);
  }
  socket.write(connectRequest(target, port));
  const reply = await reader.read(10);
  expect(reply.length, 'a full 10-byte reply').to.equal(10);
  return { socket, reader, reply: reply[1]! };
}

// --- local destinations -------------------------------------------------------------------------

async function listen(server: net.Server, host: string): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  return (server.address() as net.AddressInfo).port;
}

/** Echoes everything back; half-closes when the client does. */
function echoServer(): net.Server {
  return net.createServer({ allowHalfOpen: true }, (socket) => {
    socket.on('error', () => undefined);
    socket.pipe(socket);
  });
}

/** Reads the whole upload until FIN, then answers sha256(upload) followed by `download`, then ends. */
function digestThenDownloadServer(download: Buffer): net.Server {
  return net.createServer({ allowHalfOpen: true }, (socket) => {
    const hash = createHash('sha256');
    socket.on('data', (chunk: Buffer) => hash.update(chunk));
    socket.on('end', () => {
      socket.write(hash.digest());
      socket.end(download);
    });
    socket.on('error', () => undefined);
  });
}

// --- tests --------------------------------------------------------------------------------------

// Every test runs with a route asked of the supervisor and with one the worker holds already (a lease).
for (const routing of ROUTINGS) describe(`proxy: SOCKS5 listener, route ${routing} (component, real sockets)`, function () {
  this.timeout(30_000);

  let backend: FakeSocksBackend;
  let router: FakeRouter;
  let events: RecordingEvents;
  let proxy: Socks5ProxyServer;
  let proxyPort: number;
  let log: ReturnType<typeof capturingLogger>;
  /** Servers a test started; closed after it (net.Server.close only stops accepting, which is enough here). */
  const owned: Array<{ close(): unknown }> = [];

  async function startProxy(credentials: CredentialPolicy, timeouts?: Partial<ProxyTimeouts>): Promise<void> {
    log = capturingLogger();
    proxy = new Socks5ProxyServer({ router, events, credentials, log: log.logger, ...(timeouts ? { timeouts } : {}) });
    proxyPort = (await proxy.listen(0)).port;
  }

  async function destination(server: net.Server | http.Server, host = '127.0.0.1'): Promise<number> {
    owned.push(server);
    return listen(server, host);
  }

  beforeEach(async () => {
    backend = await startFakeSocksBackend();
    router = fakeRouter(routing, routeTo(backend));
    events = new RecordingEvents();
  });

  afterEach(async () => {
    await proxy?.close();
    await backend.close();
    for (const server of owned.splice(0)) {
      if (server instanceof http.Server) server.closeAllConnections();
      await server.close();
    }
  });

  it('relays a large payload both ways at once through an IPv4 CONNECT, byte for byte, with exact accounting', async () => {
    await startProxy(requiredCredentials);
    const port = await destination(echoServer());
    const { socket, reader, reply } = await socksConnect(proxyPort, { ipv4: '127.0.0.1' }, port);
    expect(reply).to.equal(0);
    const payload = randomBytes(8 * 1024 * 1024);
    socket.end(payload);
    const echoed = await reader.readAll();
    expect(echoed.length).to.equal(payload.length);
    expect(echoed.equals(payload)).to.equal(true);
    await waitFor('accounting', () => events.closed.length === 1);
    expect(events.opened).to.have.length(1);
    expect(events.closed[0]!.stats).to.include({ bytesUp: payload.length, bytesDown: payload.length, ok: true });
    expect(events.closed[0]!.listener).to.equal('socks');
    // What the supervisor's verdicts read of it: where to, and whose credential.
    expect(events.closed[0]!.stats.evidence.host).to.equal('127.0.0.1');
    expect(events.closed[0]!.stats.evidence.credential()).to.equal('token:test');
    // Told as the dial started too: a client may report the site before its tunnel closes.
    expect(events.openedEvidence[0]!.host).to.equal('127.0.0.1');
    expect(events.openedEvidence[0]!.credential()).to.equal('token:test');
    expect(backend.requests[0]).to.deep.include({ addressType: 'ipv4', host: '127.0.0.1', port, methods: [0] });
  });

  it('keeps the download flowing after the client half-closes its upload', async () => {
    await startProxy(requiredCredentials);
    const download = randomBytes(5 * 1024 * 1024 + 7);
    const port = await destination(digestThenDownloadServer(download));
    const { socket, reader } = await socksConnect(proxyPort, { ipv4: '127.0.0.1' }, port);
    const upload = randomBytes(3 * 1024 * 1024 + 3);
    socket.end(upload);
    const received = await reader.readAll();
    expect(received.subarray(0, 32).equals(createHash('sha256').update(upload).digest())).to.equal(true);
    expect(received.subarray(32).equals(download)).to.equal(true);
    await waitFor('accounting', () => events.closed.length === 1);
    expect(events.closed[0]!.stats).to.include({ bytesUp: upload.length, bytesDown: 32 + download.length, ok: true });
  });

  it('relays to an IPv6 target, passed to the instance as an IPv6 address', async () => {
    await startProxy(requiredCredentials);
    const port = await destination(echoServer(), '::1');
    const loopback6 = Buffer.alloc(16);
    loopback6[15] = 1;
    const { socket, reader, reply } = await socksConnect(proxyPort, { ipv6: loopback6 }, port);
    expect(reply).to.equal(0);
    socket.end('over v6');
    expect((await reader.readAll()).toString()).to.equal('over v6');
    expect(backend.requests[0]).to.deep.include({ addressType: 'ipv6', port });
    expect(backend.requests[0]!.host.replace(/(^|:)0(?=:|$)/g, '$1')).to.match(/^:*1$/);
  });

  it('serves curl --socks5-hostname: the name reaches the instance unresolved and the username is the session key', async () => {
    await startProxy(requiredCredentials);
    const origin = http.createServer((_req, res) => res.end('hello from origin'));
    const port = await destination(origin);
    const result = await curl(['--socks5-hostname', `127.0.0.1:${proxyPort}`, '--proxy-user', `alice:${TOKEN}`, `http://localhost:${port}/`]);
    expect(result.stderr).to.equal('');
    expect(result.stdout).to.equal('hello from origin');
    expect(backend.requests[0]).to.deep.include({ addressType: 'domain', host: 'localhost', port, methods: [0] });
    expect(router.requests).to.deep.equal([{ sessionKey: 'alice', clientIp: '127.0.0.1', listener: 'socks' }]);
  });

  describe('routing ahead of the CONNECT', () => {
    /** Greeting and credentials only: the client is authenticated and has not sent its request. */
    async function authenticate(): Promise<{ socket: net.Socket; reader: ByteReader }> {
      const socket = await connect(proxyPort);
      const reader = new ByteReader(socket);
      socket.write(Buffer.from([5, 1, 2]));
      expect([...(await reader.read(2))]).to.deep.equal([5, 2]);
      socket.write(userPass('alice', TOKEN));
      expect([...(await reader.read(2))]).to.deep.equal([1, 0]);
      return { socket, reader };
    }

    it('routes once the credentials are accepted and has the instance connection open before the CONNECT arrives', async () => {
      await startProxy(requiredCredentials);
      const port = await destination(echoServer());
      const { socket, reader } = await authenticate();
      await waitFor('route and instance connection before the CONNECT', () => router.requests.length === 1 && backend.connectionCount() === 1);
      expect(router.requests[0]).to.deep.include({ sessionKey: 'alice', listener: 'socks' });
      expect(backend.requests, 'no request forwarded before the client sent one').to.have.length(0);
      socket.write(connectRequest({ ipv4: '127.0.0.1' }, port));
      expect((await reader.read(10))[1]).to.equal(0);
      socket.end('early routed');
      expect((await reader.readAll()).toString()).to.equal('early routed');
      await waitFor('accounting', () => events.closed.length === 1);
      expect(router.requests, 'one route per connection').to.have.length(1);
      expect(events.opened).to.have.length(1);
      expect(events.released).to.have.length(0);
      expect(backend.requests[0]).to.deep.include({ host: '127.0.0.1', port, methods: [0] });
    });

    it('hands the route back, not as a request, when an authenticated client leaves before its CONNECT', async () => {
      await startProxy(requiredCredentials);
      const { socket } = await authenticate();
      await waitFor('instance connection opened ahead', () => backend.connectionCount() === 1);
      socket.destroy();
      await waitFor('route released', () => events.released.length === 1);
      await waitFor('instance connection closed', () => backend.connectionCount() === 0);
      expect(events.released[0]).to.deep.include({ listener: 'socks' });
      expect(events.released[0]!.route).to.deep.include({ key: 'alice', instance: 1 });
      expect(events.opened).to.have.length(0);
      expect(events.closed).to.have.length(0);
      expect(proxy.connectionCount).to.equal(0);
    });

    it('hands the route back when the request after authentication is refused (BIND)', async () => {
      await startProxy(requiredCredentials);
      const { socket, reader } = await authenticate();
      await waitFor('route requested', () => router.requests.length === 1);
      socket.write(connectRequest({ ipv4: '127.0.0.1' }, 80, 2));
      const reply = await reader.read(10);
      expect(reply[1], 'command not supported').to.equal(7);
      await reader.closed();
      await waitFor('route released, instance connection closed', () => events.released.length === 1 && backend.connectionCount() === 0);
      expect(events.opened).to.have.length(0);
      expect(events.closed).to.have.length(0);
    });

    it('hands back a route that arrives after the client already left', async () => {
      let answer: (() => void) | null = null;
      const slow = new Promise<void>((resolve) => (answer = resolve));
      await startProxy(requiredCredentials);
      const decide = router.decide;
      router.route = async (request) => {
        router.requests.push(request);
        await slow;
        return decide(request, router.requests.length - 1);
      };
      const { socket } = await authenticate();
      await waitFor('route requested', () => router.requests.length === 1);
      socket.destroy();
      await waitFor('connection gone', () => proxy.connectionCount === 0);
      answer!();
      await waitFor('late route released', () => events.released.length === 1);
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(backend.connectionCount(), 'no instance connection for a client that left').to.equal(0);
      expect(events.opened).to.have.length(0);
    });
  });

  it('refuses a client without credentials in the handshake (0xFF) and never routes it', async () => {
    await startProxy(requiredCredentials);
    const socket = await connect(proxyPort);
    const reader = new ByteReader(socket);
    socket.write(Buffer.from([5, 1, 0]));
    expect([...(await reader.read(2))]).to.deep.equal([5, 0xff]);
    await reader.closed();
    const viaCurl = await curl(['--socks5-hostname', `127.0.0.1:${proxyPort}`, 'http://localhost:1/']);
    expect(viaCurl.code).to.not.equal(0);
    expect(router.requests).to.have.length(0);
    // Refusals are written at a bounded rate: the first at once, the curl one counted for the next line.
    expect(log.lines.filter((l) => l.message === 'credential refused' && l.level === 'warn')).to.have.length(1);
  });

  it('refuses a bad token with RFC 1929 status 1 and logs "credential refused" without the secret', async () => {
    await startProxy(requiredCredentials);
    const socket = await connect(proxyPort);
    const reader = new ByteReader(socket);
    socket.write(Buffer.concat([Buffer.from([5, 1, 2]), userPass('alice', 'tp_wrong_secret')]));
    expect([...(await reader.read(4))]).to.deep.equal([5, 2, 1, 1]);
    await reader.closed();
    const viaCurl = await curl(['--socks5-hostname', `127.0.0.1:${proxyPort}`, '--proxy-user', 'alice:tp_wrong', 'http://localhost:1/']);
    expect(viaCurl.code).to.not.equal(0);
    expect(router.requests).to.have.length(0);
    const refusals = log.lines.filter((l) => l.message === 'credential refused');
    expect(refusals).to.have.length(1);
    expect(refusals[0]).to.include({ level: 'warn', reason: 'invalid', listener: 'socks', occurrences: 1 });
    expect(JSON.stringify(log.lines)).to.not.include('tp_wrong');
  });

  it('under AUTH_DISABLED accepts no-auth clients and still takes a sent username as session key', async () => {
    await startProxy(noCredentials);
    const port = await destination(echoServer());
    const anonymous = await socksConnect(proxyPort, { ipv4: '127.0.0.1' }, port, null);
    expect(anonymous.reply).to.equal(0);
    anonymous.socket.end('x');
    await anonymous.reader.readAll();
    const origin = http.createServer((_req, res) => res.end('ok'));
    const originPort = await destination(origin);
    const named = await curl(['--socks5-hostname', `127.0.0.1:${proxyPort}`, '--proxy-user', 'bob:whatever', `http://localhost:${originPort}/`]);
    expect(named.stdout).to.equal('ok');
    expect(router.requests.map((r) => r.sessionKey)).to.deep.equal([null, 'bob']);
  });

  it("passes tor's own refusal code through and scores it; refusals of private destinations are not scored", async () => {
    await startProxy(requiredCredentials);
    // An unknown name: the fake tor answers 4 (host unreachable), as tor does when the exit cannot resolve.
    const unknown = await socksConnect(proxyPort, { domain: 'no-such-host.example' }, 80);
    expect(unknown.reply).to.equal(4);
    backend.refuseWith = 5;
    const refusedPublic = await socksConnect(proxyPort, { ipv4: '93.184.216.34' }, 80);
    expect(refusedPublic.reply).to.equal(5);
    backend.refuseWith = 2;
    const refusedPrivate = await socksConnect(proxyPort, { ipv4: '10.1.2.3' }, 80);
    expect(refusedPrivate.reply).to.equal(2);
    const refusedLocalhost = await socksConnect(proxyPort, { domain: 'localhost' }, 80);
    expect(refusedLocalhost.reply).to.equal(2);
    await waitFor('accounting', () => events.closed.length === 4);
    expect(events.closed.map((c) => c.stats.failure)).to.deep.equal([
      { kind: 'socks_refused', socksReply: 4, scored: true, destination: 'no-such-host.example:80' },
      { kind: 'socks_refused', socksReply: 5, scored: true, destination: '93.184.216.34:80' },
      { kind: 'socks_refused', socksReply: 2, scored: false },
      { kind: 'socks_refused', socksReply: 2, scored: false },
    ]);
    expect(events.closed.every((c) => c.stats.ok === false)).to.equal(true);
  });

  it('answers general failure at once when no instance is routable', async () => {
    router.decide = () => ({ ok: false, reason: 'no_routable_instance' });
    await startProxy(requiredCredentials);
    const { reply, reader } = await socksConnect(proxyPort, { domain: 'example.com' }, 443);
    expect(reply).to.equal(1);
    await reader.closed();
    // Refused from the route alone: no dial was opened, so there was no deadline to wait for.
    expect(events.opened).to.have.length(0);
    expect(backend.requests).to.have.length(0);
  });

  it('answers network unreachable (3) when no exit in the countries asked for served in time, and not allowed (2) for malformed parameters', async () => {
    const detail = 'an exit in jp was assigned but did not serve within 15 s; retry';
    for (const [reason, code] of [['country_wait_timeout', 3], ['no_exit_in_country', 3], ['bad_session_params', 2]] as const) {
      router.decide = () => ({ ok: false, reason, detail });
      await startProxy(requiredCredentials);
      const { reply, reader } = await socksConnect(proxyPort, { domain: 'example.com' }, 443);
      expect(reply, reason).to.equal(code);
      await reader.closed();
      await proxy.close();
    }
    expect(events.opened).to.have.length(0);
    expect(backend.requests).to.have.length(0);
  });

  it('answers general failure when the router itself fails', async () => {
    router.decide = () => {
      throw new Error('ipc down');
    };
    await startProxy(requiredCredentials);
    expect((await socksConnect(proxyPort, { domain: 'example.com' }, 443)).reply).to.equal(1);
  });

  it('answers general failure and scores a dial failure when the instance SocksPort is down', async () => {
    const closedPort = await new Promise<number>((resolve) => {
      const probe = net.createServer().listen(0, '127.0.0.1', () => {
        const { port } = probe.address() as net.AddressInfo;
        probe.close(() => resolve(port));
      });
    });
    router.decide = () => grantedRoute(4, { host: '127.0.0.1', port: closedPort }, 'alice');
    await startProxy(requiredCredentials);
    expect((await socksConnect(proxyPort, { domain: 'example.com' }, 443)).reply).to.equal(1);
    await waitFor('accounting', () => events.closed.length === 1);
    expect(events.closed[0]!.stats.failure).to.deep.equal({ kind: 'dial', scored: true });
  });

  it('answers TTL expired (6) and records a timeout when tor does not answer within the dial deadline', async () => {
    backend.silent = true;
    await startProxy(requiredCredentials, { dialMs: 300 });
    expect((await socksConnect(proxyPort, { domain: 'slow.example' }, 80)).reply).to.equal(6);
    await waitFor('accounting', () => events.closed.length === 1);
    // tor answered its handshake, not the CONNECT: the destination (or the exit) was slow, which the supervisor judges.
    expect(events.closed[0]!.stats.failure).to.deep.equal({ kind: 'timeout', scored: true, destination: 'slow.example:80' });
  });

  for (const [name, command] of [
    ['BIND', 2],
    ['UDP ASSOCIATE', 3],
  ] as const) {
    it(`answers ${name} with a full reply 7 (command not supported)`, async () => {
      await startProxy(requiredCredentials);
      const socket = await connect(proxyPort);
      const reader = new ByteReader(socket);
      socket.write(Buffer.concat([Buffer.from([5, 1, 2]), userPass('a', TOKEN), connectRequest({ ipv4: '127.0.0.1' }, 80, command)]));
      expect([...(await reader.read(4))]).to.deep.equal([5, 2, 1, 0]);
      expect([...(await reader.read(10))]).to.deep.equal([5, 7, 0, 1, 0, 0, 0, 0, 0, 0]);
      await reader.closed();
      // Routed once the credentials were accepted, then handed back unused: never a request.
      await waitFor('route handed back', () => events.released.length === router.requests.length);
      expect(events.opened).to.have.length(0);
      expect(events.closed).to.have.length(0);
    });
  }

  it('closes a client that does not finish the handshake within the deadline', async () => {
    await startProxy(requiredCredentials, { socksHandshakeMs: 300 });
    const socket = await connect(proxyPort);
    const reader = new ByteReader(socket);
    const started = Date.now();
    socket.write(Buffer.from([5, 1]));
    await reader.closed();
    expect(Date.now() - started, 'not before the deadline').to.be.at.least(250);
    await waitFor('release', () => proxy.connectionCount === 0);
  });

  it('handles a client that sends greeting, credentials, request and data in one write', async () => {
    await startProxy(requiredCredentials);
    const port = await destination(echoServer());
    const socket = await connect(proxyPort);
    const reader = new ByteReader(socket);
    socket.end(Buffer.concat([Buffer.from([5, 1, 2]), userPass('alice', TOKEN), connectRequest({ ipv4: '127.0.0.1' }, port), Buffer.from('optimistic data')]));
    const all = await reader.readAll();
    expect([...all.subarray(0, 14)]).to.deep.equal([5, 2, 1, 0, 5, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
    expect(all.subarray(14).toString()).to.equal('optimistic data');
    await waitFor('accounting', () => events.closed.length === 1);
    expect(events.closed[0]!.stats).to.include({ bytesUp: 15, bytesDown: 15 });
  });

  it('passes an upstream reset on to the client and records it as a scored reset', async () => {
    await startProxy(requiredCredentials);
    const resetter = net.createServer((socket) => {
      socket.on('error', () => undefined);
      socket.once('data', () => socket.resetAndDestroy());
    });
    const port = await destination(resetter);
    const { socket, reader } = await socksConnect(proxyPort, { ipv4: '127.0.0.1' }, port);
    const errors: string[] = [];
    socket.on('error', (error: NodeJS.ErrnoException) => errors.push(error.code ?? ''));
    socket.write('trigger');
    await reader.closed();
    await waitFor('accounting', () => events.closed.length === 1);
    // The fake tor passes the destination's reset on as a socket error, as a broken circuit would.
    expect(events.closed[0]!.stats.failure).to.deep.equal({ kind: 'reset', scored: true });
    expect(errors).to.deep.equal(['ECONNRESET']);
  });

  it('closes a tunnel with no traffic in either direction after the idle timeout, without blaming the instance', async () => {
    await startProxy(requiredCredentials, { relayIdleMs: 300 });
    const port = await destination(echoServer());
    const { socket, reader } = await socksConnect(proxyPort, { ipv4: '127.0.0.1' }, port);
    socket.write('ping');
    expect((await reader.read(4)).toString()).to.equal('ping');
    const started = Date.now();
    await reader.closed();
    expect(Date.now() - started, 'not before the idle timeout').to.be.at.least(200);
    await waitFor('accounting', () => events.closed.length === 1);
    expect(events.closed[0]!.stats).to.include({ ok: true, bytesUp: 4, bytesDown: 4 });
  });

  it('tears down live tunnels on close()', async () => {
    await startProxy(requiredCredentials);
    const port = await destination(echoServer());
    const { reader } = await socksConnect(proxyPort, { ipv4: '127.0.0.1' }, port);
    expect(proxy.connectionCount).to.equal(1);
    await proxy.close();
    await reader.closed();
    await waitFor('accounting', () => events.closed.length === 1);
    expect(events.closed[0]!.stats.ok).to.equal(true);
  });

  describe('session ports', () => {
    it('routes every connection to its pinned instance without a session key, even if a username is sent', async () => {
      log = capturingLogger();
      const sessionPort = createSessionPortServer({ instanceId: 3, router, events, log: log.logger });
      owned.push(sessionPort);
      const port = (await sessionPort.listen(0)).port;
      const origin = http.createServer((_req, res) => res.end('pinned'));
      const originPort = await destination(origin);
      const anonymous = await curl(['--socks5-hostname', `127.0.0.1:${port}`, `http://localhost:${originPort}/`]);
      const named = await curl(['--socks5-hostname', `127.0.0.1:${port}`, '--proxy-user', 'carol:x', `http://localhost:${originPort}/`]);
      expect([anonymous.stdout, named.stdout]).to.deep.equal(['pinned', 'pinned']);
      expect(router.requests).to.deep.equal([
        { sessionKey: null, clientIp: '127.0.0.1', listener: 'session-port', instanceId: 3 },
        { sessionKey: null, clientIp: '127.0.0.1', listener: 'session-port', instanceId: 3 },
      ]);
      await waitFor('accounting', () => events.closed.length === 2);
      expect(events.closed.map((c) => c.listener)).to.deep.equal(['session-port', 'session-port']);
    });
  });
});
