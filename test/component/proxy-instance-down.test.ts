/**
 * A dial waiting on an instance that stops answering (a frozen tor still accepts TCP, so the
 * CONNECT just hangs): when the supervisor reports the instance down, both listeners abandon the
 * dial, ask for a route again and serve the client through the instance the session moved to.
 * Real curl, real sockets, two fake SocksPorts: one silent (frozen), one working.
 */
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import http from 'node:http';
import type net from 'node:net';
import { HttpProxyServer } from '../../workers/proxy/http-proxy-server.js';
import { InstanceDownSignal } from '../../workers/proxy/instance-down.js';
import type { CredentialPolicy, RouteRequest } from '../../workers/proxy/proxy-types.js';
import { Socks5ProxyServer } from '../../workers/proxy/socks5-server.js';
import { startFakeSocksBackend, type FakeSocksBackend } from '../support/fakes/socks-backend.js';
import { ROUTINGS, fakeRouter, type FakeRouter, RecordingEvents, capturingLogger, grantedRoute } from '../support/fakes/proxy-parts.js';
import { waitFor } from '../support/waiting.js';

const TOKEN = 'tp_0123456789abcdefghijkl';
const credentials: CredentialPolicy = { required: true, check: (_user, password) => (password === TOKEN ? { ok: true, credential: 'token:test' } : { ok: false }) };
const FROZEN = 1;
const HEALTHY = 2;

function curl(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('curl', ['--silent', '--show-error', '--max-time', '20', ...args], { encoding: 'utf8' }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : -1, stdout, stderr });
    });
  });
}

for (const routing of ROUTINGS) describe(`proxy: re-routing a dial away from an instance reported down, route ${routing} (component, real sockets)`, function () {
  this.timeout(30_000);
  let frozen: FakeSocksBackend;
  let healthy: FakeSocksBackend;
  let origin: http.Server;
  let originPort: number;
  let router: FakeRouter;
  let events: RecordingEvents;
  let signal: InstanceDownSignal;
  let socks: Socks5ProxyServer;
  let httpProxy: HttpProxyServer;

  beforeEach(async () => {
    frozen = await startFakeSocksBackend();
    frozen.silent = true;
    healthy = await startFakeSocksBackend();
    origin = http.createServer((_req, res) => res.end('served by the instance the session moved to'));
    await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
    originPort = (origin.address() as net.AddressInfo).port;
    // As the pool does: the session is on the frozen instance until it is reported down.
    let down = false;
    router = fakeRouter(routing, (request: RouteRequest) => {
      const backend = down ? healthy : frozen;
      return grantedRoute(down ? HEALTHY : FROZEN, backend, request.sessionKey);
    });
    events = new RecordingEvents();
    signal = new InstanceDownSignal();
    const markDown = signal.markDown.bind(signal);
    signal.markDown = (id: number): void => {
      down = true;
      markDown(id);
    };
    const deps = { router, events, credentials, instanceDown: signal, log: capturingLogger().logger };
    socks = new Socks5ProxyServer(deps);
    httpProxy = new HttpProxyServer(deps);
    await socks.listen(0);
    await httpProxy.listen(0);
  });

  afterEach(async () => {
    await socks.close();
    await httpProxy.close();
    await frozen.close();
    await healthy.close();
    origin.closeAllConnections();
    await new Promise<void>((resolve) => origin.close(() => resolve()));
  });

  const port = (server: Socks5ProxyServer | HttpProxyServer): number => (server.server.address() as net.AddressInfo).port;

  for (const listener of ['socks', 'http'] as const) {
    it(`${listener}: the waiting request is served through the new instance, the abandoned attempt is an unscored failure`, async () => {
      const args =
        listener === 'socks'
          ? ['--socks5-hostname', `127.0.0.1:${port(socks)}`, '--proxy-user', `alice:${TOKEN}`]
          : ['-x', `http://127.0.0.1:${port(httpProxy)}`, '--proxy-user', `alice:${TOKEN}`];
      const result = curl([...args, `http://127.0.0.1:${originPort}/`]);
      await waitFor('the CONNECT held by the frozen instance', () => frozen.requests.length === 1);
      expect(signal.size, 'the dial is watched').to.equal(1);
      signal.markDown(FROZEN);
      const r = await result;
      expect(r.stderr).to.equal('');
      expect(r.stdout).to.equal('served by the instance the session moved to');
      expect(router.requests, 'routed once more after the report').to.have.length(2);
      await waitFor('both attempts accounted', () => events.closed.length === 2);
      expect(events.closed[0]).to.deep.include({ listener });
      expect(events.closed[0]!.route.instance).to.equal(FROZEN);
      expect(events.closed[0]!.stats).to.deep.include({ ok: false, failure: { kind: 'dial', scored: false } });
      expect(events.closed[1]!.route.instance).to.equal(HEALTHY);
      expect(events.closed[1]!.stats.ok).to.equal(true);
      expect(events.opened.map((route) => route.instance)).to.deep.equal([FROZEN, HEALTHY]);
      expect(signal.size, 'nothing left watched').to.equal(0);
    });
  }

  for (const listener of ['socks', 'http'] as const) {
    it(`${listener}: re-routes at most once; a second report fails the request cleanly instead of looping`, async () => {
      healthy.silent = true;
      const args =
        listener === 'socks'
          ? ['--socks5-hostname', `127.0.0.1:${port(socks)}`, '--proxy-user', `alice:${TOKEN}`]
          : ['-x', `http://127.0.0.1:${port(httpProxy)}`, '--proxy-user', `alice:${TOKEN}`, '--write-out', '%{http_code}'];
      const result = curl([...args, `http://127.0.0.1:${originPort}/`]);
      await waitFor('first CONNECT held', () => frozen.requests.length === 1);
      signal.markDown(FROZEN);
      await waitFor('second CONNECT held', () => healthy.requests.length === 1);
      signal.markDown(HEALTHY);
      const r = await result;
      if (listener === 'socks') expect(r.code, `curl reports the SOCKS failure: ${r.stderr}`).to.equal(97);
      else expect(r.stdout).to.match(/instance stopped answering\n502$/);
      expect(router.requests).to.have.length(2);
      await waitFor('both attempts accounted', () => events.closed.length === 2);
      for (const c of events.closed) expect(c.stats).to.deep.include({ ok: false, failure: { kind: 'dial', scored: false } });
      expect(signal.size).to.equal(0);
    });
  }
});
