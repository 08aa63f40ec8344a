/**
 * The hop between two nodes over real loopback sockets: a forwarding node's clients' listener
 * (routed to another node's session) signs a hop credential for the client's token and dials the
 * owner's hop listener, which checks it, routes the connection as `hop`, and accounts it under the
 * client's token. The clients' listener never takes a hop credential; the hop listener never a token.
 */
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import { parseSessionUsername } from '../../shared/api/session-username.js';
import { sessionHopKey, hopWindow } from '../../shared/auth/hop-credential.js';
import { digestTokenSecret } from '../../shared/auth/token-format.js';
import { FORWARDED_INSTANCE, type HopKeySnapshot, type WorkerEndpoint } from '../../shared/ipc/protocol.js';
import type { RouteDecision } from '../../workers/proxy/proxy-types.js';
import { Socks5ProxyServer } from '../../workers/proxy/socks5-server.js';
import { HopCredentials } from '../../workers/proxy-worker/hop-credentials.js';
import { ProxyCredentials } from '../../workers/proxy-worker/proxy-credentials.js';
import { FakeRouter, RecordingEvents, capturingLogger, grantedRoute } from '../support/fakes/proxy-parts.js';
import { startFakeSocksBackend, type FakeSocksBackend } from '../support/fakes/socks-backend.js';
import { startSniffingRelay, type SniffingRelay } from '../support/network/sniffing-relay.js';
import { freePort } from '../support/network/free-ports.js';
import { waitFor } from '../support/waiting.js';

const endpoint = { handle: () => undefined } as unknown as WorkerEndpoint;
const TOKEN = 'tp_HopListenerTestToken001';
const ownerKey = { id: 'OwnerKey0001', secret: randomBytes(32).toString('base64url') };

function tokens(): ProxyCredentials {
  const t = new ProxyCredentials(false, endpoint);
  t.install({ version: 1, authDisabled: false, tokens: [{ id: 'tok1', scope: 'proxy', digest: digestTokenSecret(TOKEN) }] });
  return t;
}

function curl(args: string[]): Promise<{ code: number; stdout: string }> {
  return new Promise((resolve) => {
    execFile('curl', ['--silent', '--max-time', '10', ...args], { encoding: 'utf8' }, (error, stdout) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : -1, stdout });
    });
  });
}

describe('proxy: the hop between two nodes (component, real sockets)', function () {
  this.timeout(30_000);
  let backend: FakeSocksBackend;
  let origin: http.Server;
  let originPort: number;
  let ownerRouter: FakeRouter;
  let ownerEvents: RecordingEvents;
  let forwarderEvents: RecordingEvents;
  let hop: Socks5ProxyServer;
  let clients: Socks5ProxyServer;
  let relay: SniffingRelay;
  let clientsPort: number;
  let hopPort: number;

  before(async () => {
    backend = await startFakeSocksBackend();
    origin = http.createServer((_req, res) => res.end('served by the owner'));
    await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
    originPort = (origin.address() as net.AddressInfo).port;
    // The owner: its hop listener, routing to its instance (the fake backend).
    ownerRouter = new FakeRouter((request) => grantedRoute(3, backend, request.sessionKey));
    ownerEvents = new RecordingEvents();
    const keys: HopKeySnapshot = { version: 1, node: 'owner', keys: [ownerKey] };
    const hopPolicy = new HopCredentials(keys, tokens(), true, endpoint).policy();
    hop = new Socks5ProxyServer({ router: ownerRouter, events: ownerEvents, credentials: hopPolicy, kind: 'hop', log: capturingLogger().logger });
    hopPort = (await hop.listen(0)).port;
    // An eavesdropper between the two nodes.
    const relayPort = await freePort();
    relay = await startSniffingRelay({ host: '127.0.0.1', port: relayPort }, { host: '127.0.0.1', port: hopPort });
    // The forwarding node: its clients' listener, whose supervisor says the session is the owner's.
    forwarderEvents = new RecordingEvents();
    const forwarderRouter = new FakeRouter((request): RouteDecision => {
      const window = hopWindow(Date.now());
      // The supervisor signs for the session key, the username without its parameters (USERNAME_PARAMS).
      const sessionKey = parseSessionUsername(request.sessionKey ?? '').key;
      const key = sessionHopKey(ownerKey.secret, { from: 'forwarder', to: 'owner', sessionKey, window }).toString('base64url');
      return { ...grantedRoute(FORWARDED_INSTANCE, { host: '127.0.0.1', port: relayPort }, request.sessionKey), forward: { node: 'owner', hop: { from: 'forwarder', window, keyId: ownerKey.id, key } } };
    });
    clients = new Socks5ProxyServer({ router: forwarderRouter, events: forwarderEvents, credentials: tokens().policy(), log: capturingLogger().logger });
    clientsPort = (await clients.listen(0)).port;
  });
  after(async () => {
    await clients.close();
    await relay.close();
    await hop.close();
    await backend.close();
    origin.close();
  });

  it('forwards a client’s connection to the owner, which serves it as its own and charges the client’s token', async () => {
    const r = await curl(['--socks5-hostname', `127.0.0.1:${clientsPort}`, '--proxy-user', `crawl-9-country-de:${TOKEN}`, `http://127.0.0.1:${originPort}/`]);
    expect(r.code).to.equal(0);
    expect(r.stdout).to.equal('served by the owner');
    expect(ownerRouter.requests.map((q) => ({ sessionKey: q.sessionKey, listener: q.listener }))).to.deep.equal([{ sessionKey: 'crawl-9-country-de', listener: 'hop' }]);
    await waitFor('both connections accounted', () => ownerEvents.closed.length === 1 && forwarderEvents.closed.length === 1);
    expect(ownerEvents.closed[0]?.listener).to.equal('hop');
    expect(ownerEvents.closed[0]?.stats.evidence.credential(), 'the owner charges the client’s token').to.equal('token:tok1');
    expect(forwarderEvents.closed[0]?.stats.evidence.credential()).to.equal('token:tok1');
    const sniffed = relay.sniffed.at(-1);
    expect(sniffed?.username, 'the client’s own username crosses the hop').to.equal('crawl-9-country-de');
    expect(sniffed?.password).to.match(/^th1~forwarder~\d+~OwnerKey0001~token:tok1~[A-Za-z0-9_-]{43}$/);
  });

  it('a sniffed hop credential: its session only, on the hop listener only', async () => {
    const { username, password } = relay.sniffed.at(-1) as { username: string; password: string };
    const through = (port: number, user: string, pass: string) =>
      curl(['--socks5-hostname', `127.0.0.1:${port}`, '--proxy-user', `${encodeURIComponent(user)}:${encodeURIComponent(pass)}`, `http://127.0.0.1:${originPort}/`]);
    expect((await through(hopPort, username, password)).stdout, 'replayed for its session within its window').to.equal('served by the owner');
    expect((await through(hopPort, 'crawl-9', password)).stdout, 'the same session without the parameters').to.equal('served by the owner');
    expect((await through(hopPort, 'crawl-10', password)).code, 'another session').to.equal(97);
    expect((await through(clientsPort, username, password)).code, 'a clients’ listener').to.equal(97);
    expect((await through(hopPort, username, TOKEN)).code, 'a proxy token on the hop listener').to.equal(97);
  });
});
