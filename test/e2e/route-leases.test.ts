/**
 * Route leases end to end (issue 16): a proxy worker routes a session's repeated connections
 * itself, and every change the API makes (rotate, delete, quarantine, drain) is in force for the
 * session's very next connection, on a pool of 3 on the private network with real clients.
 */
import { expect } from 'chai';
import type { InstanceView } from '../../shared/api/views.js';
import { HealApi } from '../support/clients/api-client.js';
import { curlHttp, curlSocks } from '../support/clients/curl.js';
import { whoamiIp } from '../support/clients/api-reads.js';
import { openSocksTunnelOrThrow } from '../support/clients/socks5-client.js';
import { parsePrometheusText, samplesOf } from '../support/parsers/prometheus-text.js';
import { TEST_PROXY_TOKEN, withService } from '../support/fixtures/service.js';
import { pollUntil } from '../support/waiting.js';

const POOL_SIZE = 3;
const PROXY_WORKERS = 2;
/** Accounting arrives in batches: a counter is read until it reaches what was sent. */
const ACCOUNTED_WITHIN_MS = 10_000;

describe('route leases on the private network (3 instances, 2 proxy workers)', function () {
  this.timeout(240_000);
  let api: HealApi;
  let seq = 0;
  const suite = withService({ POOL_SIZE: String(POOL_SIZE), PROXY_WORKERS: String(PROXY_WORKERS) }, { ready: POOL_SIZE, readyTimeoutMs: 120_000 });
  before(async () => {
    api = await HealApi.signIn(suite.svc);
  });
  afterEach(async () => {
    // Every instance back in service for the next test.
    for (const i of await api.instances()) if (i.health.state === 'quarantined' || i.draining) await api.action(i.id, 'release');
    await pollUntil('all instances routable', () => api.pool(), 60_000, { until: (p) => p.routable === POOL_SIZE });
  });

  /** A counter's value, or with `sample` one sample of a family (a histogram's `_count`). */
  const metric = async (family: string, sample = family): Promise<number> => {
    const families = parsePrometheusText((await api.metricsText()).text);
    return samplesOf(families, family)
      .filter((s) => s.name === sample)
      .reduce((sum, s) => sum + s.value, 0);
  };
  const routeRoundTrips = (): Promise<number> => metric('pool_ipc_roundtrip_seconds', 'pool_ipc_roundtrip_seconds_count');
  const viaSocks = async (key: string): Promise<string> => {
    const r = await curlSocks(suite.svc.socksPort, key, TEST_PROXY_TOKEN, suite.svc.whoamiUrl);
    expect(r.code, r.stderr).to.equal(0);
    return whoamiIp(r.stdout);
  };
  const viaHttp = async (key: string): Promise<string> => {
    const r = await curlHttp(suite.svc.httpPort, key, TEST_PROXY_TOKEN, suite.svc.whoamiUrl);
    expect(r.code, r.stderr).to.equal(0);
    return whoamiIp(r.stdout);
  };
  const requestsOn = async (): Promise<Map<number, number>> => new Map((await api.instances()).map((i: InstanceView) => [i.id, i.totals.requests]));
  /** Which instance carried the one request `send` makes: the only one whose request counter moved. */
  const servedBy = async (send: () => Promise<unknown>): Promise<number> => {
    const before = await requestsOn();
    await send();
    const after = await pollUntil('the request accounted on an instance', requestsOn, ACCOUNTED_WITHIN_MS, {
      until: (m) => [...m].reduce((sum, [id, n]) => sum + n - (before.get(id) ?? 0), 0) >= 1,
    });
    const moved = [...after].filter(([id, n]) => n !== (before.get(id) ?? 0)).map(([id]) => id);
    expect(moved, 'exactly one instance carried the request').to.have.length(1);
    return moved[0] as number;
  };

  it('routes a session’s repeated connections without asking the supervisor, and counts every one exactly', async () => {
    const key = `lease-${++seq}`;
    const hitsBefore = await metric('pool_route_lease_hits_total');
    const roundTripsBefore = await routeRoundTrips();
    const ips = new Set<string>();
    for (let i = 0; i < 12; i++) ips.add(i % 2 === 0 ? await viaSocks(key) : await viaHttp(key));
    expect([...ips], 'one exit for the session').to.have.length(1);
    const s = await pollUntil('12 requests accounted', () => api.session(key), ACCOUNTED_WITHIN_MS, { until: (v) => v.requests === 12 });
    expect(s).to.include({ requests: 12, failures: 0, active: 0 });
    // At most one round trip per proxy worker; every other connection used that worker's lease.
    const hits = (await metric('pool_route_lease_hits_total')) - hitsBefore;
    const roundTrips = (await routeRoundTrips()) - roundTripsBefore;
    expect(roundTrips, 'route round trips').to.be.at.most(PROXY_WORKERS);
    expect(hits, 'lease hits').to.equal(12 - roundTrips);

    // A connection routed from a lease is live in the supervisor's view while it is open.
    const tunnel = await openSocksTunnelOrThrow({ port: suite.svc.socksPort, username: key, password: TEST_PROXY_TOKEN, host: 'whoami.testnet', targetPort: suite.svc.net.whoami.port });
    try {
      const open = await api.session(key);
      expect(open.active).to.equal(1);
      expect(Date.parse(open.last_seen)).to.be.at.least(Date.parse(s.last_seen));
    } finally {
      tunnel.socket.destroy();
    }
    await pollUntil('the tunnel closed in the books', () => api.session(key), ACCOUNTED_WITHIN_MS, { until: (v) => v.active === 0 && v.requests === 13 });
  });

  it('a burst of 60 connections on a new session is placed once and counted 60 times', async () => {
    const key = `burst-${++seq}`;
    const roundTripsBefore = await routeRoundTrips();
    // Every request settled before judging, so that a failure leaves none in flight for the next test.
    const settled = await Promise.allSettled(Array.from({ length: 60 }, (_, i) => (i % 2 === 0 ? viaSocks(key) : viaHttp(key))));
    const failed = settled.flatMap((r) => (r.status === 'rejected' ? [String(r.reason)] : []));
    expect(failed, 'failed requests').to.deep.equal([]);
    const ips = settled.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    expect(new Set(ips).size, 'one exit').to.equal(1);
    const s = await pollUntil('60 requests accounted', () => api.session(key), ACCOUNTED_WITHIN_MS, { until: (v) => v.requests === 60 });
    expect(s).to.include({ failures: 0, active: 0 });
    // Connections of one key wait for the answer their worker is already waiting for.
    expect((await routeRoundTrips()) - roundTripsBefore, 'route round trips').to.be.at.most(PROXY_WORKERS);
  });

  it('a session rotate is in force for the very next connection, every time', async () => {
    const key = `rotate-${++seq}`;
    let at = await servedBy(() => viaSocks(key));
    await servedBy(() => viaHttp(key)); // both workers now hold a lease, most likely
    for (let round = 0; round < 4; round++) {
      const rotated = await api.json<{ instance: number }>(`/api/sessions/${encodeURIComponent(key)}/rotate`, { method: 'POST' });
      expect(rotated.instance, 'moved').to.not.equal(at);
      // At once, through either listener (either worker): the new instance, never the old lease.
      expect(await servedBy(() => (round % 2 === 0 ? viaSocks(key) : viaHttp(key))), `round ${round}`).to.equal(rotated.instance);
      expect(await servedBy(() => (round % 2 === 0 ? viaHttp(key) : viaSocks(key))), `round ${round}, other listener`).to.equal(rotated.instance);
      at = rotated.instance;
    }
  });

  it('quarantine and drain of the session’s instance move its very next connection', async () => {
    // The session alone in the table: a displaced session is rebalanced onto an instance that
    // comes back (the quarantined one, after its new circuit) when its own instance is over its
    // share, and the earlier tests' sessions would make that share depend on timing.
    for (const s of await api.sessions()) expect((await api.raw(`/api/sessions/${encodeURIComponent(s.key)}`, { method: 'DELETE' })).status).to.equal(204);
    const key = `move-${++seq}`;
    const first = await servedBy(() => viaSocks(key));
    await servedBy(() => viaHttp(key));
    await api.action(first, 'quarantine');
    const second = await servedBy(() => viaSocks(key));
    expect(second).to.not.equal(first);
    expect(await servedBy(() => viaHttp(key))).to.equal(second);
    // The quarantined one back (its ladder's first rung is a new circuit) before the drain, so
    // that its return cannot land between the next two connections.
    await pollUntil('the quarantined instance back in service', () => api.pool(), 60_000, { until: (p) => p.routable === POOL_SIZE });
    await api.action(second, 'drain');
    const third = await servedBy(() => viaHttp(key));
    expect(third).to.not.equal(second);
    expect(await servedBy(() => viaSocks(key))).to.equal(third);
  });

  it('a deleted session starts over on its next connection (a new session, counted from zero)', async () => {
    const key = `delete-${++seq}`;
    for (let i = 0; i < 3; i++) await viaSocks(key);
    const old = await pollUntil('3 requests', () => api.session(key), ACCOUNTED_WITHIN_MS, { until: (v) => v.requests === 3 });
    expect((await api.raw(`/api/sessions/${encodeURIComponent(key)}`, { method: 'DELETE' })).status).to.equal(204);
    await viaSocks(key);
    const fresh = await pollUntil('the new session’s request', () => api.session(key), ACCOUNTED_WITHIN_MS, { until: (v) => v.requests >= 1 });
    expect(fresh.requests, 'the old session’s count is gone').to.equal(1);
    expect(Date.parse(fresh.created_at)).to.be.above(Date.parse(old.created_at));
  });
});

describe('route leases and SESSION_TTL=3s (2 instances)', function () {
  this.timeout(240_000);
  let api: HealApi;
  const suite = withService({ POOL_SIZE: '2', SESSION_TTL: '3s' }, { ready: 2, readyTimeoutMs: 120_000 });
  before(async () => {
    api = await HealApi.signIn(suite.svc);
  });

  it('a session used only through leases lives on past its TTL while in use, and expires once idle for it', async () => {
    const key = 'lease-ttl';
    const first = await curlSocks(suite.svc.socksPort, key, TEST_PROXY_TOKEN, suite.svc.whoamiUrl);
    expect(first.code, first.stderr).to.equal(0);
    const created = (await api.session(key)).created_at;
    // 9 s of use, one request a second: three TTLs, every request after the first from a lease.
    const until = Date.now() + 9_000;
    let sent = 1;
    while (Date.now() < until) {
      await new Promise((r) => setTimeout(r, 1000));
      const r = sent % 2 === 0 ? await curlSocks(suite.svc.socksPort, key, TEST_PROXY_TOKEN, suite.svc.whoamiUrl) : await curlHttp(suite.svc.httpPort, key, TEST_PROXY_TOKEN, suite.svc.whoamiUrl);
      expect(r.code, r.stderr).to.equal(0);
      sent++;
    }
    const alive = await api.session(key);
    expect(alive.created_at, 'the same session throughout').to.equal(created);
    expect(alive.requests).to.equal(sent);
    // Idle: gone within the TTL and a tick or two.
    const gone = await pollUntil('expired', async () => (await api.raw(`/api/sessions/${key}`)).status, 10_000, { until: (s) => s === 404 });
    expect(gone).to.equal(404);
  });
});
