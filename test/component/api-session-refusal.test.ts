import { expect } from 'chai';
import fc from 'fast-check';
import type { RouteRefusalView } from '../../shared/api/route-refusal.js';
import { cannedData } from '../support/fakes/supervisor-ipc.js';
import { fuzzRuns } from '../support/fixtures/fuzz-runs.js';
import { PROXY_TOKEN, startApiHarness, undocumentedResponses, type ApiHarness } from '../support/fixtures/api-harness.js';

const ZZ: RouteRefusalView = {
  reason: 'no_exit_in_country',
  detail: 'no exit in zz: none in the exit catalog',
  at: '2030-01-01T12:00:03.000Z',
  age_ms: 41,
  http_status: 503,
  proxy_status_error: 'destination_unavailable',
  socks_reply: 3,
};

/**
 * GET /api/sessions/{key}/refusal of the real app (supervisor faked): what it answers, to whom,
 * and the hostile input it refuses before the supervisor is asked (docs/api.md, docs/security.md).
 */
describe('API: a session’s last route refusal', function () {
  let h: ApiHarness;
  let otherToken: string;
  before(async () => {
    h = await startApiHarness();
    const issued = await h.request('/api/tokens', { method: 'POST', bearer: h.adminToken, body: { name: 'other-scraper', scope: 'proxy' } });
    otherToken = (issued.json() as { secret: string }).secret;
  });
  beforeEach(() => {
    h.fake.data = { ...cannedData(), refusals: { 'shop-1': ZZ } };
    h.fake.restore();
  });
  after(async () => h.close());

  const get = (key: string, bearer: string) => h.request(`/api/sessions/${encodeURIComponent(key)}/refusal`, { bearer });

  it('answers the refusal the supervisor recorded, to the proxy token that was refused', async () => {
    const r = await get('shop-1', h.storeProxyToken);
    expect(r.status).to.equal(200);
    expect(r.json()).to.deep.equal({ session: 'shop-1', refusal: ZZ });
    expect(h.fake.callsOf('sessions.refusal').at(-1)).to.deep.equal({ key: 'shop-1' });
  });

  it('answers an unknown key as a key never refused (nothing tells whether it exists)', async () => {
    const r = await get('never-used', PROXY_TOKEN);
    expect(r.status).to.equal(200);
    expect(r.json()).to.deep.equal({ session: 'never-used', refusal: null });
  });

  it('answers another token’s key too: keys are not tenancy, and it shows what GET /api/sessions/{key} would', async () => {
    const r = await get('shop-1', otherToken);
    expect(r.status).to.equal(200);
    expect(r.json()).to.deep.equal({ session: 'shop-1', refusal: ZZ });
  });

  it('refuses an over-long key and broken percent-encoding with 400, another client’s ip: session with 404, before the supervisor is asked', async () => {
    const before = h.fake.callsOf('sessions.refusal').length;
    expect((await get('k'.repeat(256), h.storeProxyToken)).status).to.equal(400);
    expect((await get('é'.repeat(128), h.storeProxyToken)).status).to.equal(400);
    expect((await h.request('/api/sessions/%E0%A4%A/refusal', { bearer: h.storeProxyToken })).status).to.equal(400);
    const foreign = await get('ip:10.9.8.7', h.storeProxyToken);
    expect(foreign.status).to.equal(404);
    expect(h.fake.callsOf('sessions.refusal').length).to.equal(before);
    expect((await get('ip:10.9.8.7', h.adminToken)).status, 'the admin may ask').to.equal(200);
  });

  it('asks for a credential: none is 401', async () => {
    expect((await h.request('/api/sessions/shop-1/refusal')).status).to.equal(401);
  });

  it('property: any key of 1 to 255 bytes is answered 200 or 404, never reaches the supervisor altered, and never fails', async () => {
    await fc.assert(
      fc.asyncProperty(fc.string({ minLength: 1, maxLength: 60 }), async (key) => {
        const r = await get(key, h.storeProxyToken);
        expect(r.status, key).to.be.oneOf([200, 404]);
        if (r.status === 200) expect((r.json() as { session: string }).session).to.equal(key);
      }),
      { numRuns: fuzzRuns(50) },
    );
  });

  it('answers only as docs/openapi.yaml documents', () => {
    expect(undocumentedResponses(h)).to.deep.equal([]);
  });
});
