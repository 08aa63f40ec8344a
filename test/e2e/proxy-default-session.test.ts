/**
 * Callers that name no session (empty username, token as password) under DEFAULT_SESSION
 * `shared` and `random`, and session expiry after SESSION_TTL. Two short-lived services of 2
 * instances; DEFAULT_SESSION=ip is covered in proxy-credential-free.test.ts.
 */
import { expect } from 'chai';
import type { SessionView } from '../../shared/api/views.js';
import { curlSocks } from '../support/clients/curl.js';
import { apiJson, instanceViews, poolSummary, sessionView, sessionWhen, whoamiIp } from '../support/clients/api-reads.js';
import { httpProxyGet } from '../support/clients/http-proxy-client.js';
import { socksHttpGet } from '../support/clients/socks5-client.js';
import { TEST_PROXY_TOKEN, withService } from '../support/fixtures/service.js';
import { pollUntil } from '../support/waiting.js';

const POOL_SIZE = 2;
/** No session name: an empty username, the token as password (both listeners allow it). */
const ANONYMOUS = { username: '', password: TEST_PROXY_TOKEN };

describe('DEFAULT_SESSION=shared, with SESSION_TTL=3s', function () {
  this.timeout(240_000);
  let admin: string;

  const suite = withService({ POOL_SIZE: String(POOL_SIZE), DEFAULT_SESSION: 'shared', SESSION_TTL: '3s' }, { ready: POOL_SIZE, readyTimeoutMs: 120_000 });
  before(async () => {
    admin = await suite.svc.login();
  });


  it('puts every caller that names no session, from any address and on both listeners, on one shared session', async () => {
    const target = { host: 'whoami.testnet', targetPort: suite.svc.net.whoami.port };
    const results = [
      await socksHttpGet({ port: suite.svc.socksPort, ...target, ...ANONYMOUS }),
      await socksHttpGet({ port: suite.svc.socksPort, ...target, ...ANONYMOUS, localAddress: '127.0.0.2' }),
    ];
    for (const r of results) expect(r.outcome.kind).to.equal('open');
    const viaHttp = await httpProxyGet({ proxyPort: suite.svc.httpPort, url: suite.svc.whoamiUrl, credential: ANONYMOUS });
    const viaHttpOther = await httpProxyGet({ proxyPort: suite.svc.httpPort, url: suite.svc.whoamiUrl, credential: ANONYMOUS, localAddress: '127.0.0.3' });
    expect(viaHttp.status, viaHttp.body).to.equal(200);
    expect(viaHttpOther.status, viaHttpOther.body).to.equal(200);
    const ips = [whoamiIp(results[0]?.body ?? null), whoamiIp(results[1]?.body ?? null), whoamiIp(viaHttp.body), whoamiIp(viaHttpOther.body)];
    expect(new Set(ips), ips.join(' ')).to.have.lengthOf(1);

    const shared = await sessionWhen(suite.svc, 'shared', TEST_PROXY_TOKEN, 'the 4 requests accounted', (v) => v.requests >= 4);
    expect(shared.requests).to.equal(4);
    const keys = (await apiJson<SessionView[]>(suite.svc, '/api/sessions', admin)).map((v) => v.key);
    expect(keys).to.deep.equal(['shared']);
  });

  it('removes a session after SESSION_TTL idle', async () => {
    const r = await curlSocks(suite.svc.socksPort, 'short-lived', TEST_PROXY_TOKEN, suite.svc.whoamiUrl);
    expect(r.code, r.stderr).to.equal(0);
    const idleFrom = Date.now();
    const s = await sessionWhen(suite.svc, 'short-lived', TEST_PROXY_TOKEN, 'accounted', (v) => v.requests === 1);
    expect(s.active).to.equal(0);
    // Well inside the TTL it is still there...
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(await sessionView(suite.svc, 'short-lived', TEST_PROXY_TOKEN), 'still pinned after 1 s idle').to.not.equal(null);
    // ...and once it has been idle for the TTL it is gone.
    await pollUntil('session short-lived removed', async () => ((await sessionView(suite.svc, 'short-lived', TEST_PROXY_TOKEN)) === null ? true : undefined), 15_000);
    expect(Date.now() - idleFrom).to.be.at.least(3000);
    const r404 = await suite.svc.api('/api/sessions/short-lived', { bearer: TEST_PROXY_TOKEN });
    expect(r404.status).to.equal(404);
  });
});

describe('DEFAULT_SESSION=random', function () {
  this.timeout(240_000);
  let admin: string;

  const suite = withService({ POOL_SIZE: String(POOL_SIZE), DEFAULT_SESSION: 'random' }, { ready: POOL_SIZE, readyTimeoutMs: 120_000 });
  before(async () => {
    admin = await suite.svc.login();
  });


  it('spreads callers that name no session over the instances and creates no session', async () => {
    const before = await instanceViews(suite.svc, admin);
    const target = { host: 'whoami.testnet', targetPort: suite.svc.net.whoami.port };
    const requests = 16;
    for (let i = 0; i < requests; i++) {
      if (i % 2 === 0) {
        const r = await socksHttpGet({ port: suite.svc.socksPort, ...target, ...ANONYMOUS });
        expect(r.outcome.kind).to.equal('open');
        whoamiIp(r.body);
      } else {
        const r = await httpProxyGet({ proxyPort: suite.svc.httpPort, url: suite.svc.whoamiUrl, credential: ANONYMOUS });
        expect(r.status, r.body).to.equal(200);
        whoamiIp(r.body);
      }
    }
    const total = (views: { totals: { requests: number } }[]): number => views.reduce((n, v) => n + v.totals.requests, 0);
    const after = await pollUntil('every request accounted', async () => {
      const views = await instanceViews(suite.svc, admin);
      return total(views) >= total(before) + requests ? views : undefined;
    }, 15_000);
    expect(total(after)).to.equal(total(before) + requests);
    // Each connection is a fresh pick: with 16 picks over 2 instances both carry traffic
    // (all on one would happen with probability 2^-15).
    for (const v of after) {
      const was = before.find((b) => b.id === v.id)?.totals.requests ?? 0;
      expect(v.totals.requests, `requests on instance ${v.id}`).to.be.greaterThan(was);
    }
    expect((await poolSummary(suite.svc, admin)).sessions).to.equal(0);
    expect(await apiJson<SessionView[]>(suite.svc, '/api/sessions', admin)).to.deep.equal([]);
  });
});
