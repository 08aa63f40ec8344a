/**
 * MAX_CONNECTIONS_PER_WORKER over real sockets: one budget shared by a SOCKS5 and an HTTP
 * listener, as in a proxy worker. Over the budget, HTTP clients get a 503 that says why and SOCKS5
 * clients are closed at once; when connections end, the budget is free again (no lock-up).
 */
import { expect } from 'chai';
import http from 'node:http';
import net from 'node:net';
import { ConnectionBudget } from '../../workers/proxy/connection-budget.js';
import { HttpProxyServer } from '../../workers/proxy/http-proxy-server.js';
import type { CredentialPolicy } from '../../workers/proxy/proxy-types.js';
import { Socks5ProxyServer } from '../../workers/proxy/socks5-server.js';
import { startFakeSocksBackend, type FakeSocksBackend } from '../support/fakes/socks-backend.js';
import { FakeRouter, RecordingEvents, capturingLogger, grantedRoute } from '../support/fakes/proxy-parts.js';
import { waitFor } from '../support/waiting.js';

const TOKEN = 'tp_0123456789abcdefghijkl';
const credentials: CredentialPolicy = { required: true, check: (_user, password) => (password === TOKEN ? { ok: true, credential: 'token:test' } : { ok: false }) };

function connect(port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port }, () => resolve(socket));
    socket.once('error', reject);
  });
}

/** Everything the server sends until it closes, and how it closed. */
function drain(socket: net.Socket): Promise<{ data: Buffer; reset: boolean }> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let reset = false;
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', () => (reset = true));
    socket.on('close', () => resolve({ data: Buffer.concat(chunks), reset }));
  });
}

/** A SOCKS5 tunnel through the proxy to `port`, left open. */
async function socksTunnel(proxyPort: number, port: number): Promise<net.Socket> {
  const socket = await connect(proxyPort);
  const u = Buffer.from('alice');
  const p = Buffer.from(TOKEN);
  const portBytes = Buffer.alloc(2);
  portBytes.writeUInt16BE(port);
  socket.write(Buffer.concat([Buffer.from([5, 1, 2, 1, u.length]), u, Buffer.from([p.length]), p, Buffer.from([5, 1, 0, 1, 127, 0, 0, 1]), portBytes]));
  const head = await new Promise<Buffer>((resolve, reject) => {
    let buf = Buffer.alloc(0);
    const onData = (c: Buffer): void => {
      buf = Buffer.concat([buf, c]);
      if (buf.length >= 14) {
        socket.removeListener('data', onData);
        resolve(buf);
      }
    };
    socket.on('data', onData);
    socket.once('close', () => reject(new Error('closed during the SOCKS5 handshake')));
  });
  expect([...head.subarray(0, 4)], 'method, credentials accepted').to.deep.equal([5, 2, 1, 0]);
  expect(head[5], 'CONNECT succeeded').to.equal(0);
  return socket;
}

describe('proxy: connection budget shared by the listeners of a worker (component, real sockets)', function () {
  this.timeout(20_000);
  let backend: FakeSocksBackend;
  let socks: Socks5ProxyServer;
  let httpProxy: HttpProxyServer;
  let destination: net.Server;
  let destinationPort: number;
  let budget: ConnectionBudget;
  let log: ReturnType<typeof capturingLogger>;
  const clients: net.Socket[] = [];

  beforeEach(async () => {
    backend = await startFakeSocksBackend();
    destination = net.createServer((s) => s.pipe(s));
    await new Promise<void>((resolve) => destination.listen(0, '127.0.0.1', resolve));
    destinationPort = (destination.address() as net.AddressInfo).port;
    log = capturingLogger();
    budget = new ConnectionBudget(2, log.logger);
    const router = new FakeRouter((request) => grantedRoute(0, backend, request.sessionKey));
    const deps = { router, events: new RecordingEvents(), credentials, log: log.logger, budget };
    socks = new Socks5ProxyServer(deps);
    httpProxy = new HttpProxyServer(deps);
    await socks.listen(0);
    await httpProxy.listen(0);
  });

  afterEach(async () => {
    for (const c of clients.splice(0)) c.destroy();
    await socks.close();
    await httpProxy.close();
    await backend.close();
    await new Promise<void>((resolve) => destination.close(() => resolve()));
  });

  const socksPort = (): number => (socks.server.address() as net.AddressInfo).port;
  const httpPort = (): number => (httpProxy.server.address() as net.AddressInfo).port;

  it('refuses the connection over the budget on either listener with a clear answer, and takes new ones once one ends', async () => {
    clients.push(await socksTunnel(socksPort(), destinationPort));
    clients.push(await socksTunnel(socksPort(), destinationPort));
    expect(budget.inUse).to.equal(2);

    // HTTP: a 503 naming the limit, sent even though the request was already on its way.
    const refusedHttp = await connect(httpPort());
    const httpAnswer = drain(refusedHttp);
    refusedHttp.write(`GET http://127.0.0.1:${destinationPort}/ HTTP/1.1\r\nHost: 127.0.0.1\r\nProxy-Authorization: Basic ${Buffer.from(`alice:${TOKEN}`).toString('base64')}\r\n\r\n`);
    const { data } = await httpAnswer;
    const text = data.toString('latin1');
    expect(text).to.match(/^HTTP\/1\.1 503 /);
    expect(text).to.include('Proxy-Status: exitpool; error=connection_limit_reached');
    expect(text).to.include('MAX_CONNECTIONS_PER_WORKER');

    // SOCKS5: closed before any byte is answered.
    const refusedSocks = await connect(socksPort());
    const socksAnswer = drain(refusedSocks);
    refusedSocks.write(Buffer.from([5, 1, 2]));
    expect((await socksAnswer).data.length, 'no SOCKS5 answer over the budget').to.equal(0);
    expect(budget.takeRefusedCount()).to.equal(2);
    expect(log.lines.filter((l) => l.level === 'warn' && String(l.message).startsWith('connection refused'))).to.have.length(1);

    // One tunnel ends: the budget is free again for the next client, on the other listener too.
    clients.shift()?.destroy();
    await waitFor('budget given back', () => budget.inUse === 1);
    const served = await new Promise<string>((resolve, reject) => {
      const req = http.request(
        { host: '127.0.0.1', port: httpPort(), method: 'CONNECT', path: `127.0.0.1:${destinationPort}`, headers: { 'Proxy-Authorization': `Basic ${Buffer.from(`alice:${TOKEN}`).toString('base64')}` } },
      );
      req.on('connect', (res, socket) => {
        clients.push(socket);
        socket.write('after the flood');
        socket.once('data', (c: Buffer) => resolve(`${res.statusCode} ${c.toString()}`));
      });
      req.on('error', reject);
      req.end();
    });
    expect(served).to.equal('200 after the flood');
    expect(budget.inUse).to.equal(2);
  });

  it('gives the whole budget back when the listeners close (shutdown), and after clients in mid-handshake leave', async () => {
    const half = await connect(socksPort());
    half.write(Buffer.from([5, 1, 2]));
    clients.push(await socksTunnel(socksPort(), destinationPort));
    await waitFor('both held', () => budget.inUse === 2);
    half.destroy();
    await waitFor('the half-finished handshake gave its place back', () => budget.inUse === 1);
    await socks.close();
    expect(budget.inUse).to.equal(0);
  });
});
