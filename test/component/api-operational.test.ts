import { expect } from 'chai';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Known } from '../../shared/ipc/endpoint.js';
import type { WorkerRequests } from '../../shared/ipc/protocol.js';
import { CONTENT_SECURITY_POLICY } from '../../workers/api/security-headers.js';
import { concretePath, startApiHarness, undocumentedResponses, type ApiHarness, type ApiResponse } from '../support/fixtures/api-harness.js';

/**
 * /health, /metrics and the dashboard's static assets (public), and what every route answers
 * when the supervisor does not: 503 when the IPC request times out or the supervisor is gone,
 * 500 when its handler fails (docs/api.md, "Operational", "Errors").
 */

function expectPlain(r: ApiResponse, status: number, what: string): void {
  expect(r.status, `${what}: ${r.text}`).to.equal(status);
  expect(r.headers.get('content-type'), what).to.match(/^text\/plain/);
}

/** Routes whose IPC request uses the endpoint's default deadline, with the method each sends. */
const DEFAULT_DEADLINE_ROUTES: [string, string, Known<WorkerRequests>][] = [
  ['GET', '/api/pool', 'pool.summary'],
  ['POST', '/api/pool/resize', 'pool.resize'],
  ['POST', '/api/pool/rotate', 'pool.rotate'],
  ['GET', '/api/instances', 'instances.list'],
  ['GET', '/api/instances/0', 'instances.get'],
  ['GET', '/api/sessions/alice', 'sessions.get'],
  ['POST', '/api/sessions/alice/failure', 'sessions.failure'],
  ['DELETE', '/api/sessions/alice', 'sessions.delete'],
  ['GET', '/api/events', 'events.recent'],
  ['GET', '/api/stats/history', 'stats.history'],
  ['GET', '/api/tokens', 'tokens.list'],
];

describe('API operational endpoints', function () {
  let h: ApiHarness;
  before(async () => {
    h = await startApiHarness();
  });
  afterEach(() => h.fake.restore());
  after(async () => h.close());

  it('GET /health is public: 200 while an instance is routable, 503 when none is', async () => {
    const up = await h.request('/health');
    expectPlain(up, 200, 'health');
    expect(up.text).to.match(/routable/);
    expect((await h.request('/health', { headers: { authorization: 'Bearer tp_0000000000000000000000' } })).status).to.equal(200);
    h.fake.data.pool = { ...h.fake.data.pool, routable: 0 };
    expectPlain(await h.request('/health'), 503, 'health with nothing routable');
    h.fake.data.pool = { ...h.fake.data.pool, routable: 1 };
    h.fake.data.proxyWorkersListening = 0;
    const down = await h.request('/health');
    expectPlain(down, 503, 'health with the proxy listeners down');
    expect(down.text).to.match(/proxy listeners are not up/);
    h.fake.data.proxyWorkersListening = 1;
  });

  it('GET /health answers 503 when the supervisor does not answer within its deadline', async () => {
    h.fake.stall('health.get');
    const started = Date.now();
    expectPlain(await h.request('/health'), 503, 'health with a stalled supervisor');
    // api-app.ts gives health.get a deadline of 1 s.
    expect(Date.now() - started, 'after the deadline, not before').to.be.at.least(900);
  });

  it('GET /metrics is public and passes the exposition through with its content type', async () => {
    const r = await h.request('/metrics');
    expect(r.status).to.equal(200);
    expect(r.headers.get('content-type')).to.equal(h.fake.data.metrics.contentType);
    expect(r.text).to.equal(h.fake.data.metrics.text);
  });

  it('documents every response above', () => {
    expect(undocumentedResponses(h)).to.deep.equal([]);
  });
});

describe('API dashboard static assets', function () {
  let h: ApiHarness;
  let dir: string;
  let jwt: string;
  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-dashboard-'));
    fs.mkdirSync(path.join(dir, 'assets'));
    fs.writeFileSync(path.join(dir, 'index.html'), '<!doctype html><title>exitpool</title>');
    fs.writeFileSync(path.join(dir, 'assets', 'app-1a2b3c.js'), 'console.log("dashboard")');
    fs.writeFileSync(path.join(dir, 'favicon.svg'), '<svg/>');
    fs.writeFileSync(path.join(dir, 'assets', 'app-1a2b3c.js.map'), '{"version":3}');
    fs.mkdirSync(path.join(dir, 'src', 'views'), { recursive: true });
    fs.writeFileSync(path.join(dir, 'src', 'main.js'), '// compiled source');
    fs.writeFileSync(path.join(dir, 'src', 'main.js.map'), '{"version":3}');
    fs.writeFileSync(path.join(dir, 'src', 'views', 'App.js'), '// compiled source');
    h = await startApiHarness({ dashboardDir: dir });
    jwt = await h.login();
  });
  after(async () => {
    await h.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('serves index.html (revalidated) at / and for client-side routes, without a credential', async () => {
    for (const p of ['/', '/instances', '/sessions/alice', '/index.html']) {
      const r = await h.request(p);
      expect(r.status, p).to.equal(200);
      expect(r.headers.get('content-type'), p).to.match(/^text\/html/);
      expect(r.text, p).to.contain('<title>exitpool</title>');
      expect(r.headers.get('cache-control'), p).to.contain('no-cache');
    }
    expect((await h.request('/favicon.svg')).status).to.equal(200);
  });

  it('serves hashed assets as immutable; a missing asset is a plain 404, not index.html', async () => {
    const js = await h.request('/assets/app-1a2b3c.js');
    expect(js.status).to.equal(200);
    expect(js.headers.get('cache-control')).to.contain('immutable');
    expect(js.headers.get('cache-control')).to.contain('max-age=31536000');
    expectPlain(await h.request('/assets/missing.js'), 404, 'missing asset');
  });

  it('never serves the dashboard for /api paths: 401 without a credential, 404 with one', async () => {
    for (const p of ['/api', '/api/', '/api/index.html', '/api/instances/0/nope']) {
      const anonymous = await h.request(p);
      expectPlain(anonymous, 401, `${p} without a credential`);
      const signedIn = await h.request(p, { bearer: jwt });
      expectPlain(signedIn, 404, `${p} signed in`);
      expect(signedIn.text).to.not.contain('<title>');
    }
  });

  it('never serves compiled sources or source maps', async () => {
    for (const p of ['/src/main.js', '/src/main.js.map', '/src/views/App.js', '/src/', '/src', '/SRC/main.js', '/assets/app-1a2b3c.js.map', '/src/../src/main.js', '/%73rc/main.js']) {
      const r = await h.request(p);
      expectPlain(r, 404, p);
      expect(r.text, p).to.not.contain('compiled source');
    }
  });

  it('sends the browser security headers on the page, the assets, the API and errors', async () => {
    for (const [p, bearer] of [['/', undefined], ['/assets/app-1a2b3c.js', undefined], ['/api/pool', jwt], ['/api/pool', undefined], ['/nope.txt', undefined]] as const) {
      const r = await h.request(p, bearer === undefined ? {} : { bearer });
      expect(r.headers.get('content-security-policy'), p).to.equal(CONTENT_SECURITY_POLICY);
      expect(r.headers.get('content-security-policy'), p).to.contain("frame-ancestors 'none'");
      expect(r.headers.get('x-frame-options'), p).to.equal('DENY');
      expect(r.headers.get('x-content-type-options'), p).to.equal('nosniff');
      expect(r.headers.get('referrer-policy'), p).to.equal('no-referrer');
    }
  });

  it('answers other methods on dashboard paths with a plain 404', async () => {
    expectPlain(await h.request('/', { method: 'POST' }), 404, 'POST /');
    expectPlain(await h.request('/instances', { method: 'DELETE' }), 404, 'DELETE /instances');
  });
});

describe('API without a built dashboard', function () {
  let h: ApiHarness;
  before(async () => {
    h = await startApiHarness({ dashboardDir: null });
  });
  after(async () => h.close());

  it('answers / with 503 and anything else outside /api with a plain 404', async () => {
    expectPlain(await h.request('/'), 503, '/ without a dashboard');
    expectPlain(await h.request('/instances'), 404, '/instances without a dashboard');
    expectPlain(await h.request('/apix'), 404, '/apix');
  });
});

describe('API when the supervisor does not answer', function () {
  let h: ApiHarness;
  let jwt: string;
  before(async () => {
    h = await startApiHarness({ ipcTimeoutMs: 150 });
    jwt = await h.login();
  });
  after(async () => h.close());

  it('answers 503 (plain text) when the IPC request times out', async () => {
    for (const [, , method] of DEFAULT_DEADLINE_ROUTES) h.fake.stall(method);
    const callsBefore = h.fake.calls.length;
    const started = Date.now();
    const answers = await Promise.all(
      DEFAULT_DEADLINE_ROUTES.map(([method, p]) => h.request(p, { method, bearer: jwt, ...(p.endsWith('resize') ? { body: { size: 2 } } : {}) })),
    );
    expect(Date.now() - started, 'after the deadline (ipcTimeoutMs), not before').to.be.at.least(140);
    answers.forEach((r, i) => {
      const [method, p] = DEFAULT_DEADLINE_ROUTES[i]!;
      expectPlain(r, 503, `${method} ${p} with a stalled supervisor`);
      expect(r.text).to.match(/supervisor/);
    });
    // Each asked the supervisor once and gave up at the deadline.
    expect(h.fake.calls.slice(callsBefore).map((c) => c.method).sort()).to.deep.equal(DEFAULT_DEADLINE_ROUTES.map(([, , ipc]) => ipc).sort());
    h.fake.restore();
  });

  it('answers 500 (plain text) when the supervisor handler fails', async () => {
    h.fake.answer('pool.summary', () => {
      throw new Error('boom');
    });
    const r = await h.request('/api/pool', { bearer: jwt });
    expectPlain(r, 500, 'a failing handler');
    expect(r.text).to.not.contain('boom');
    h.fake.restore();
  });

  it('answers 503 at once on every route that needs the supervisor once it is gone; the rest keep working', async () => {
    h.fake.cut();
    const needsSupervisor = h.routes.filter((r) => !r.path.startsWith('/api/auth/'));
    expect(needsSupervisor.length).to.equal(h.routes.length - 3);
    for (const route of needsSupervisor) {
      const body = route.path.endsWith('resize') ? { size: 2 } : route.path === '/api/tokens' ? { name: 'x', scope: 'proxy' } : undefined;
      const r = await h.request(concretePath(route, { id: route.path.startsWith('/api/tokens') ? 'abc' : '0' }), { method: route.method, bearer: jwt, ...(body ? { body } : {}) });
      expectPlain(r, 503, `${route.method} ${route.path} with the supervisor gone`);
    }
    expectPlain(await h.request('/health'), 503, 'health with the supervisor gone');
    expectPlain(await h.request('/metrics'), 503, 'metrics with the supervisor gone');
    // Credentials are checked in the worker: sign-in, status and tickets need no supervisor.
    expect((await h.request('/api/auth/status')).status).to.equal(200);
    expect((await h.request('/api/auth/ticket', { method: 'POST', bearer: await h.login() })).status).to.equal(200);
    expectPlain(await h.request('/api/pool'), 401, 'still authenticated first');
  });

  it('documents every response above except the generic 500', () => {
    expect(undocumentedResponses(h).filter((gap) => !gap.includes('→ 500'))).to.deep.equal([]);
  });
});
