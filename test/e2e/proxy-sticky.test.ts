/**
 * Sticky proxying end to end (issue 4): one service of 4 instances on the private network,
 * driven with real clients (curl on both listeners, node:http with a keep-alive Agent, a raw
 * SOCKS5 client). The last test takes every instance out of routing, so it stays last.
 */
import { expect } from 'chai';
import http from 'node:http';
import type { InstanceView, SessionRotateResult, SessionView } from '../../shared/api/views.js';
import { curl, curlHttp, curlSocks } from '../support/clients/curl.js';
import { apiJson, instanceView, instanceViews, instanceWhen, poolSummary, poolWhen, sessionView, sessionWhen, whoamiIp } from '../support/clients/api-reads.js';
import { pollUntil } from '../support/waiting.js';
import { httpProxyGet } from '../support/clients/http-proxy-client.js';
import { openSocksTunnel } from '../support/clients/socks5-client.js';
import { TEST_PROXY_TOKEN, withService } from '../support/fixtures/service.js';

const POOL_SIZE = 4;
/**
 * "Fails at once" (a proxy that cannot serve refuses at once): generous for a loaded machine, and
 * still far below the dial deadline (UPSTREAM_DIAL_TIMEOUT_MS) that a hang would wait out.
 */
const IMMEDIATE_FAILURE_MS = 10_000;
/** SOCKS5 reply "general SOCKS server failure" (RFC 1928). */
const SOCKS_GENERAL_FAILURE = 0x01;

describe('sticky proxying on the private network (4 instances)', function () {
  this.timeout(240_000);
  let admin: string;

  const session = async (key: string): Promise<SessionView> => {
    const s = await sessionView(suite.svc, key, TEST_PROXY_TOKEN);
    expect(s, `session ${key}`).to.not.equal(null);
    return s as SessionView;
  };

  /** An instance's exit becomes the one a request just reported, confirmed by traffic. */
  const confirmedExit = (id: number, ip: string): Promise<InstanceView> =>
    instanceWhen(suite.svc, id, admin, `exit confirmed as ${ip}`, (v) => v.exit_confirmed && v.exit_ip === ip);

  const suite = withService({ POOL_SIZE: String(POOL_SIZE) }, { ready: POOL_SIZE, readyTimeoutMs: 120_000 });
  before(async () => {
    admin = await suite.svc.login();
  });


  it('gives one key the same exit over 20 requests through the SOCKS5 listener (curl --socks5-hostname)', async () => {
    const ips: string[] = [];
    for (let i = 0; i < 20; i++) {
      const r = await curlSocks(suite.svc.socksPort, 'sticky-socks', TEST_PROXY_TOKEN, suite.svc.whoamiUrl);
      expect(r.code, r.stderr).to.equal(0);
      ips.push(whoamiIp(r.stdout));
    }
    expect(new Set(ips), ips.join(' ')).to.have.lengthOf(1);
    const s = await sessionWhen(suite.svc, 'sticky-socks', TEST_PROXY_TOKEN, 'all 20 requests accounted', (v) => v.requests >= 20);
    expect(s.requests).to.equal(20);
    expect(s.failures).to.equal(0);
    // The exit the destination saw is the exit of the instance the session is pinned to.
    await confirmedExit(s.instance, ips[0] as string);
  });

  it('gives one key the same exit over 20 requests through the HTTP proxy listener (curl -x)', async () => {
    const ips: string[] = [];
    for (let i = 0; i < 20; i++) {
      const r = await curlHttp(suite.svc.httpPort, 'sticky-http', TEST_PROXY_TOKEN, suite.svc.whoamiUrl);
      expect(r.code, r.stderr).to.equal(0);
      ips.push(whoamiIp(r.stdout));
    }
    expect(new Set(ips), ips.join(' ')).to.have.lengthOf(1);
    const s = await sessionWhen(suite.svc, 'sticky-http', TEST_PROXY_TOKEN, 'all 20 requests accounted', (v) => v.requests >= 20);
    expect(s.requests).to.equal(20);
    expect(s.failures).to.equal(0);
    await confirmedExit(s.instance, ips[0] as string);
  });

  it('spreads 8 different keys over all 4 instances', async () => {
    // Start from an empty table so the placement of these 8 keys is all that counts.
    for (const s of await apiJson<SessionView[]>(suite.svc, '/api/sessions', admin)) {
      await apiJson(suite.svc, `/api/sessions/${encodeURIComponent(s.key)}`, TEST_PROXY_TOKEN, { method: 'DELETE', expected: 204 });
    }
    const keys = Array.from({ length: 8 }, (_, i) => `spread-${i}`);
    const results = await Promise.all(
      keys.map((k, i) => (i % 2 === 0 ? curlSocks(suite.svc.socksPort, k, TEST_PROXY_TOKEN, suite.svc.whoamiUrl) : curlHttp(suite.svc.httpPort, k, TEST_PROXY_TOKEN, suite.svc.whoamiUrl))),
    );
    for (const r of results) expect(r.code, r.stderr).to.equal(0);
    const placed = await Promise.all(keys.map(async (k) => (await session(k)).instance));
    expect(new Set(placed), `instances ${placed.join(',')}`).to.have.lengthOf(POOL_SIZE);
    // New keys go to the instance with the fewest sessions, so 8 over 4 is exactly 2 each.
    for (const v of await instanceViews(suite.svc, admin)) expect(v.sessions, `sessions on instance ${v.id}`).to.equal(2);
  });

  it('moves a rotated session to another instance, and the next request on the same keep-alive connection leaves through it', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const credential = { username: 'rotate-me', password: TEST_PROXY_TOKEN };
      const first = await httpProxyGet({ proxyPort: suite.svc.httpPort, url: suite.svc.whoamiUrl, credential, agent });
      expect(first.status, first.body).to.equal(200);
      const firstIp = whoamiIp(first.body);
      const before = await session('rotate-me');
      await confirmedExit(before.instance, firstIp);

      const rotated = await apiJson<SessionRotateResult>(suite.svc, '/api/sessions/rotate-me/rotate', TEST_PROXY_TOKEN, { method: 'POST' });
      expect(rotated.session).to.equal('rotate-me');
      expect(rotated.instance, 'rotation target').to.not.equal(before.instance);
      expect((await session('rotate-me')).instance).to.equal(rotated.instance);

      const second = await httpProxyGet({ proxyPort: suite.svc.httpPort, url: suite.svc.whoamiUrl, credential, agent });
      expect(second.status, second.body).to.equal(200);
      expect(second.socket, 'the keep-alive connection was reused').to.equal(first.socket);
      expect(second.localPort).to.equal(first.localPort);
      const secondIp = whoamiIp(second.body);
      // The request left through the new instance: its exit is the one the destination saw.
      await confirmedExit(rotated.instance, secondIp);
      // The rotation prefers an instance whose exit differs from the one left behind; when it
      // named such an exit, the destination saw the change.
      if (rotated.exit_confirmed && rotated.exit_ip !== firstIp) expect(secondIp).to.not.equal(firstIp);
      expect((await session('rotate-me')).instance).to.equal(rotated.instance);
    } finally {
      agent.destroy();
    }
  });

  it('fails a private destination the network refuses without scoring it against the instance', async () => {
    const key = 'private-destination';
    const ok = await curlSocks(suite.svc.socksPort, key, TEST_PROXY_TOKEN, suite.svc.whoamiUrl);
    expect(ok.code, ok.stderr).to.equal(0);
    const { instance } = await session(key);
    const before = await instanceWhen(suite.svc, instance, admin, 'the successful request accounted', (v) => v.totals.requests > 0);

    const viaSocks = await curlSocks(suite.svc.socksPort, key, TEST_PROXY_TOKEN, 'http://10.0.0.1/');
    expect(viaSocks.code, 'curl through SOCKS5 must fail').to.not.equal(0);
    const viaHttp = await curlHttp(suite.svc.httpPort, key, TEST_PROXY_TOKEN, 'http://10.0.0.1/', ['-o', '/dev/null', '-w', '%{http_code}']);
    expect(viaHttp.stdout.trim(), 'HTTP proxy status').to.match(/^5\d\d$/);

    // Both count as failed requests of the instance...
    const after = await instanceWhen(suite.svc, instance, admin, 'two more failed requests', (v) => v.totals.failures >= before.totals.failures + 2);
    // ...but neither is scored: its health is exactly as it was.
    expect(after.health.state).to.equal(before.health.state);
    expect(after.health.failure_score).to.equal(before.health.failure_score);
    expect(after.health.failures_in_window).to.equal(before.health.failures_in_window);
    expect(after.health.transport_failures).to.equal(before.health.transport_failures);
    expect(after.health.consecutive_failures).to.equal(before.health.consecutive_failures);
    expect((await session(key)).instance, 'the session stays put').to.equal(instance);
  });

  it('fails an unresolvable hostname; failing the same way through another exit, it is the destination\'s fault, not scored', async () => {
    const key = 'unresolvable-destination';
    const ok = await curlSocks(suite.svc.socksPort, key, TEST_PROXY_TOKEN, suite.svc.whoamiUrl);
    expect(ok.code, ok.stderr).to.equal(0);
    const { instance } = await session(key);
    const before = await instanceWhen(suite.svc, instance, admin, 'the successful request accounted', (v) => v.totals.requests > 0);
    const viaSocks = await curlSocks(suite.svc.socksPort, key, TEST_PROXY_TOKEN, 'http://nonexistent.invalid/');
    expect(viaSocks.code, 'curl through SOCKS5 must fail').to.not.equal(0);
    const viaHttp = await curlHttp(suite.svc.httpPort, key, TEST_PROXY_TOKEN, 'http://nonexistent.invalid/', ['-o', '/dev/null', '-w', '%{http_code}']);
    expect(viaHttp.stdout.trim(), 'HTTP proxy status').to.equal('502');
    // Both count as failed requests of the instance...
    const after = await instanceWhen(suite.svc, instance, admin, 'two more failed requests', (v) => v.totals.failures >= before.totals.failures + 2);
    // ...but the name fails through every exit (the network's resolver answers NXDOMAIN), so neither is held against this one.
    const metrics = await pollUntil('the destination blamed', async () => (await fetch(`http://127.0.0.1:${suite.svc.apiPort}/metrics`)).text(), 20_000, {
      until: (t) => /^pool_failures_blamed_on_destination_total [1-9]/m.test(t),
    });
    expect(metrics).to.match(/^pool_failures_blamed_on_destination_total 2$/m);
    const settled = await instanceView(suite.svc, instance, admin);
    expect(settled.health.failure_score).to.equal(before.health.failure_score);
    expect(settled.health.state).to.equal(before.health.state);
    expect(after.totals.failures).to.be.at.least(before.totals.failures + 2);
    expect((await session(key)).instance, 'the session stays put').to.equal(instance);
  });

  it('fails at once on both listeners when no instance is routable', async () => {
    const ids = (await instanceViews(suite.svc, admin)).map((v) => v.id);
    try {
      for (const id of ids) {
        const q = await apiJson<InstanceView>(suite.svc, `/api/instances/${id}/quarantine`, admin, { method: 'POST' });
        expect(q.health.state).to.equal('quarantined');
      }
      // A manual quarantine starts the remediation ladder, whose first rung (a new circuit)
      // puts the instance on probation, routable again, within seconds. Draining holds every
      // instance out of routing for as long as the assertions take.
      for (const id of ids) await apiJson(suite.svc, `/api/instances/${id}/drain`, admin, { method: 'POST' });
      expect((await poolSummary(suite.svc, admin)).routable).to.equal(0);
      expect((await suite.svc.api('/health')).status).to.equal(503);

      const socks = await openSocksTunnel({
        port: suite.svc.socksPort,
        host: 'whoami.testnet',
        targetPort: suite.svc.net.whoami.port,
        username: 'nowhere',
        password: TEST_PROXY_TOKEN,
      });
      expect(socks, 'SOCKS5 reply').to.deep.include({ kind: 'refused', step: 'request', code: SOCKS_GENERAL_FAILURE });
      expect(socks.elapsedMs).to.be.below(IMMEDIATE_FAILURE_MS);

      const plain = await httpProxyGet({ proxyPort: suite.svc.httpPort, url: suite.svc.whoamiUrl, credential: { username: 'nowhere', password: TEST_PROXY_TOKEN } });
      expect(plain.status).to.equal(503);
      expect(plain.headers['proxy-status']).to.match(/^exitpool; error=destination_unavailable/);
      expect(plain.elapsedMs).to.be.below(IMMEDIATE_FAILURE_MS);

      // The real clients give up at once too.
      const started = performance.now();
      const [curlS, curlH] = await Promise.all([
        curlSocks(suite.svc.socksPort, 'nowhere', TEST_PROXY_TOKEN, suite.svc.whoamiUrl),
        curl(['-x', `http://nowhere:${TEST_PROXY_TOKEN}@127.0.0.1:${suite.svc.httpPort}`, '-o', '/dev/null', '-w', '%{http_code}', suite.svc.whoamiUrl]),
      ]);
      expect(performance.now() - started).to.be.below(IMMEDIATE_FAILURE_MS + 1000);
      expect(curlS.code, 'curl through SOCKS5').to.not.equal(0);
      expect(curlH.stdout.trim()).to.equal('503');
    } finally {
      for (const id of ids) await apiJson(suite.svc, `/api/instances/${id}/release`, admin, { method: 'POST' });
    }
    await poolWhen(suite.svc, admin, 'every instance routable again after release', (p) => p.routable === POOL_SIZE);
  });
});
