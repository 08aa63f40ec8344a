import { expect } from 'chai';
import type { Access } from '../../workers/api/access.js';
import { PROXY_TOKEN, concretePath, startApiHarness, undocumentedResponses, type ApiHarness, type ApiResponse } from '../support/fixtures/api-harness.js';

/**
 * The default-closed API (docs/api.md, "Authentication and access", "Errors" 401/403/404): a walk over
 * the whole route table, every route and every method, against the real express app.
 */

/** The only /api/ routes that answer without a credential. Adding one here is a security decision. */
const PUBLIC_API_ROUTES = new Set(['GET /api/auth/status', 'POST /api/auth/login']);
/** Public paths outside /api/. */
const PUBLIC_OPERATIONAL = ['/health', '/metrics'];
const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;
const STREAM = { method: 'GET', path: '/api/stream', access: 'stream' as Access };

interface WalkRoute {
  method: string;
  path: string;
  access: Access;
}

function expectChallenge(r: ApiResponse, what: string): void {
  expect(r.status, `${what}: ${r.text}`).to.equal(401);
  expect(r.headers.get('www-authenticate'), what).to.match(/^Bearer realm="exitpool"/);
  expect(r.headers.get('content-type'), what).to.match(/^text\/plain/);
}

function expectForbidden(r: ApiResponse, what: string): void {
  expect(r.status, `${what}: ${r.text}`).to.equal(403);
  expect(r.headers.get('www-authenticate'), what).to.equal(null);
  expect(r.headers.get('content-type'), what).to.match(/^text\/plain/);
}

describe('API route table walk (default closed)', function () {
  let h: ApiHarness;
  let jwt: string;
  let ticket: string;
  let walk: WalkRoute[];

  before(async () => {
    h = await startApiHarness();
    jwt = await h.login();
    ticket = await h.ticket();
    walk = [...h.routes.map((r) => ({ method: r.method, path: r.path, access: r.access })), STREAM];
  });
  after(async () => h.close());

  it('declares exactly the two public /api/ routes as public', () => {
    const declaredPublic = walk.filter((r) => r.access === 'public').map((r) => `${r.method} ${r.path}`);
    expect(new Set(declaredPublic)).to.deep.equal(PUBLIC_API_ROUTES);
    for (const r of walk) expect(r.path.startsWith('/api/'), r.path).to.equal(true);
  });

  it('answers the public routes without a credential', async () => {
    for (const r of walk.filter((x) => x.access === 'public')) {
      const res = await h.request(concretePath(r), { method: r.method, body: { user: 'nobody', password: 'x' } });
      expect(res.status, `${r.method} ${r.path}`).to.be.oneOf([200, 401]);
      // Login refuses the wrong password with 401 (and a challenge); status always answers 200.
      if (r.path === '/api/auth/status') expect(res.status).to.equal(200);
    }
    for (const p of PUBLIC_OPERATIONAL) expect((await h.request(p)).status, p).to.equal(200);
  });

  it('answers 401 with WWW-Authenticate for every protected route without a credential, and changes nothing', async () => {
    const before = h.fake.calls.length;
    for (const r of walk.filter((x) => x.access !== 'public')) {
      const what = `${r.method} ${r.path}`;
      expectChallenge(await h.request(concretePath(r), { method: r.method }), `${what} without credential`);
      expect((await h.request(concretePath(r), { method: r.method })).headers.get('www-authenticate')).to.equal('Bearer realm="exitpool"');
      // A body never gets parsed, let alone acted on, before the credential is checked.
      expectChallenge(await h.request(concretePath(r), { method: r.method, rawBody: '{"size": ' }), `${what} without credential, bad JSON`);
      expectChallenge(await h.request(concretePath(r), { method: r.method, rawBody: JSON.stringify({ size: 2, pad: 'x'.repeat(64 * 1024) }) }), `${what} without credential, oversized body`);
    }
    expect(h.fake.calls.length).to.equal(before);
  });

  it('answers 401 (invalid_token) for malformed, unknown and expired credentials on every protected route', async () => {
    const expired = jwt;
    const bad: [string, Record<string, string>][] = [
      ['malformed bearer', { authorization: 'Bearer not a credential' }],
      ['bearer of junk', { authorization: 'Bearer %%%' }],
      ['unknown token', { authorization: 'Bearer tp_0000000000000000000000' }],
      ['tampered session credential', { authorization: `Bearer ${jwt.slice(0, -2)}xx` }],
      ['basic scheme', { authorization: `Basic ${Buffer.from(`u:${h.adminToken}`).toString('base64')}` }],
      ['ticket as bearer', { authorization: `Bearer ${ticket}` }],
    ];
    for (const r of walk.filter((x) => x.access !== 'public')) {
      for (const [name, headers] of bad) {
        const res = await h.request(concretePath(r), { method: r.method, headers });
        expectChallenge(res, `${r.method} ${r.path} with ${name}`);
        expect(res.headers.get('www-authenticate')).to.equal('Bearer realm="exitpool", error="invalid_token"');
      }
    }
    h.clock.now += 2 * 60 * 60_000;
    try {
      for (const r of walk.filter((x) => x.access !== 'public')) {
        const res = await h.request(concretePath(r), { method: r.method, bearer: expired });
        expectChallenge(res, `${r.method} ${r.path} with an expired session credential`);
        expect(res.text).to.match(/expired/);
      }
    } finally {
      h.clock.now = Date.now();
    }
  });

  it('answers 403 without a challenge to a proxy token on every admin and stream route, and changes nothing', async () => {
    const before = h.fake.calls.length;
    const adminRoutes = walk.filter((r) => r.access === 'admin' || r.access === 'stream');
    expect(adminRoutes.length).to.be.greaterThan(15);
    for (const r of adminRoutes) {
      for (const token of [h.storeProxyToken, PROXY_TOKEN]) {
        expectForbidden(await h.request(concretePath(r), { method: r.method, bearer: token, body: { size: 1, name: 'x', scope: 'admin' } }), `${r.method} ${r.path} with a proxy token`);
      }
    }
    expect(h.fake.calls.length).to.equal(before);
  });

  it('refuses a ticket on every route but the stream (401 as a bearer, ignored in the query)', async () => {
    for (const r of walk.filter((x) => x.access !== 'public' && x.access !== 'stream')) {
      const inQuery = await h.request(`${concretePath(r)}?ticket=${ticket}`, { method: r.method });
      expectChallenge(inQuery, `${r.method} ${r.path} with ?ticket=`);
      expect(inQuery.headers.get('www-authenticate')).to.equal('Bearer realm="exitpool"');
    }
  });

  it('lets through the credentials each access level allows (proxy: proxy tokens too; admin: admin tokens and sign-in)', async () => {
    for (const r of walk.filter((x) => x.access !== 'public')) {
      const allowed = r.access === 'proxy' ? [h.storeProxyToken, h.adminToken, jwt] : [h.adminToken, jwt];
      for (const bearer of allowed) {
        if (r.access === 'stream') {
          const ac = new AbortController();
          const res = await fetch(h.base + r.path, { headers: { authorization: `Bearer ${bearer}` }, signal: ac.signal });
          expect(res.status, r.path).to.equal(200);
          ac.abort();
          continue;
        }
        const res = await h.request(concretePath(r), { method: r.method, bearer });
        // Past the guard; the ticket handler itself then refuses tokens (a ticket needs a sign-in).
        const refusedByHandler = r.path === '/api/auth/ticket' && bearer !== jwt;
        expect(res.status, `${r.method} ${r.path}: ${res.text}`).to.not.equal(401);
        if (!refusedByHandler) expect(res.status, `${r.method} ${r.path}: ${res.text}`).to.not.equal(403);
      }
    }
  });

  it('authenticates every unmatched /api/ path and method first (401), then answers 404, never the dashboard', async () => {
    const declared = new Set(walk.map((r) => `${r.method} ${r.path}`));
    const unmatched: [string, string][] = [];
    for (const r of walk) for (const m of METHODS) if (!declared.has(`${m} ${r.path}`)) unmatched.push([m, concretePath(r)]);
    unmatched.push(['GET', '/api/nope'], ['POST', '/api/pool/nope'], ['GET', '/api/instances/0/nope'], ['GET', '/api/'], ['DELETE', '/api/instances']);
    expect(unmatched.length).to.be.greaterThan(60);
    for (const [method, path] of unmatched) {
      expectChallenge(await h.request(path, { method }), `${method} ${path} without credential`);
      expectChallenge(await h.request(`${path}?ticket=${ticket}`, { method }), `${method} ${path} with a ticket`);
      for (const bearer of [h.storeProxyToken, jwt]) {
        const res = await h.request(path, { method, bearer });
        expect(res.status, `${method} ${path}`).to.equal(404);
        expect(res.headers.get('content-type')).to.match(/^text\/plain/);
      }
    }
  });

  it('documents every response above (status, media type, schema)', () => {
    expect(undocumentedResponses(h)).to.deep.equal([]);
  });
});

describe('API under AUTH_DISABLED', function () {
  let h: ApiHarness;
  before(async () => {
    h = await startApiHarness({ authDisabled: true });
  });
  after(async () => h.close());

  it('reports required false and the configured user', async () => {
    expect((await h.request('/api/auth/status')).json()).to.deep.equal({ required: false, user: 'operator' });
  });

  it('opens every route without a credential through the same table', async () => {
    for (const r of h.routes) {
      const res = await h.request(concretePath(r), { method: r.method });
      expect(res.status, `${r.method} ${r.path}: ${res.text}`).to.not.be.oneOf([401, 403]);
    }
    const ac = new AbortController();
    const stream = await fetch(`${h.base}/api/stream`, { signal: ac.signal });
    expect(stream.status).to.equal(200);
    ac.abort();
  });

  it('signs in with anything and mints a ticket without a credential', async () => {
    const login = await h.request('/api/auth/login', { method: 'POST', body: { user: 'anyone', password: 'anything' } });
    expect(login.status).to.equal(200);
    expect(login.json()).to.have.keys(['token', 'expires', 'user']);
    const ticket = await h.request('/api/auth/ticket', { method: 'POST' });
    expect(ticket.status).to.equal(200);
    expect(ticket.json()).to.have.keys(['ticket', 'expires_in']);
  });

  it('answers unmatched /api/ paths 404 directly', async () => {
    for (const [method, path] of [['GET', '/api/nope'], ['PUT', '/api/pool'], ['POST', '/api/instances'], ['GET', '/api/'], ['GET', '/api']] as const) {
      const res = await h.request(path, { method });
      expect(res.status, `${method} ${path}`).to.equal(404);
      expect(res.headers.get('www-authenticate')).to.equal(null);
    }
  });

  it('documents every response above', () => {
    expect(undocumentedResponses(h)).to.deep.equal([]);
  });
});
