import { expect } from 'chai';
import { rawHttp as raw } from '../support/network/raw-http.js';
import { startApiHarness, type ApiHarness } from '../support/fixtures/api-harness.js';

/**
 * The DNS-rebinding and cross-site guards of the real app (request-origin.ts), with the raw
 * headers a browser sends (fetch will not let a caller set Host, so this speaks HTTP itself).
 * Both hold with authentication on and with AUTH_DISABLED, where they are the only guard.
 */

for (const authDisabled of [false, true]) {
  describe(`API request origin guards (${authDisabled ? 'AUTH_DISABLED' : 'authentication on'})`, function () {
    let h: ApiHarness;
    let bearer: Record<string, string>;
    let host: string;
    before(async () => {
      h = await startApiHarness({ authDisabled, origin: { bindHost: '127.0.0.1', allowedHosts: ['exitpool.internal'] } });
      bearer = authDisabled ? {} : { authorization: `Bearer ${h.adminToken}` };
      host = new URL(h.base).host;
    });
    after(async () => h.close());

    it('refuses a Host that is a foreign name (DNS rebinding), on every path, before anything reaches the supervisor', async () => {
      const before = h.fake.calls.length;
      for (const name of ['attacker.example', 'attacker.example:8080', 'rebind.127.0.0.1.nip.io', 'localhost.attacker.example', 'exitpool.internal.evil', '']) {
        for (const [method, p] of [['GET', '/api/pool'], ['POST', '/api/instances/0/quarantine'], ['POST', '/api/tokens'], ['GET', '/metrics'], ['GET', '/']] as const) {
          const r = await raw(h.base, method, p, { host: name, ...bearer, 'content-type': 'application/json' }, method === 'POST' ? '{"name":"x","scope":"admin"}' : undefined);
          expect(r.status, `${method} ${p} Host ${name}: ${r.text}`).to.equal(403);
          expect(r.text).to.match(/API_ALLOWED_HOSTS/);
        }
      }
      expect(h.fake.calls.length).to.equal(before);
      expect(h.store.listTokens().filter((t) => t.name === 'x')).to.deep.equal([]);
    });

    it('answers IP literals, localhost names, BIND_HOST and API_ALLOWED_HOSTS names', async () => {
      for (const name of [host, '127.0.0.1', '10.1.2.3:8080', '[::1]:8080', '[::1]', 'localhost', 'LOCALHOST:8080', 'dash.localhost', 'exitpool.internal', 'Exitpool.Internal.:80']) {
        const r = await raw(h.base, 'GET', '/api/pool', { host: name, ...bearer });
        expect(r.status, `Host ${name}: ${r.text}`).to.equal(200);
      }
    });

    it('refuses state-changing requests a page of another site sends (form posts, no-cors fetches)', async () => {
      const before = h.fake.callsOf('instances.action').length;
      const attempts: Record<string, string>[] = [
        { origin: 'http://attacker.example', 'content-type': 'text/plain' },
        { origin: 'null', 'content-type': 'application/x-www-form-urlencoded' },
        { origin: `http://127.0.0.1:1`, 'content-type': 'text/plain' },
        { 'sec-fetch-site': 'cross-site', 'content-type': 'text/plain' },
        { 'sec-fetch-site': 'same-site', 'content-type': 'text/plain' },
        { 'sec-fetch-site': 'cross-site', origin: `http://${host}` },
        { origin: 'not a url' },
      ];
      for (const headers of attempts) {
        for (const [method, p] of [['POST', '/api/instances/0/quarantine'], ['DELETE', '/api/sessions/alice'], ['POST', '/api/auth/login']] as const) {
          const r = await raw(h.base, method, p, { host, ...bearer, ...headers }, "{}");
          expect(r.status, `${method} ${p} ${JSON.stringify(headers)}: ${r.text}`).to.equal(403);
          expect(r.text).to.match(/cross-site request refused/);
        }
      }
      expect(h.fake.callsOf('instances.action').length).to.equal(before);
    });

    it("lets the dashboard's own requests and non-browser clients through", async () => {
      const allowed: Record<string, string>[] = [{}, { origin: `http://${host}` }, { 'sec-fetch-site': 'same-origin', origin: `http://${host}` }, { 'sec-fetch-site': 'none' }];
      for (const headers of allowed) {
        const r = await raw(h.base, 'POST', '/api/instances/0/rotate', { host, ...bearer, ...headers });
        expect(r.status, `${JSON.stringify(headers)}: ${r.text}`).to.equal(200);
      }
      // Reads are not refused for their origin: a cross-site page cannot read the answer anyway (no CORS).
      const read = await raw(h.base, 'GET', '/api/pool', { host, ...bearer, 'sec-fetch-site': 'cross-site', origin: 'http://attacker.example' });
      expect(read.status).to.equal(200);
    });
  });
}
