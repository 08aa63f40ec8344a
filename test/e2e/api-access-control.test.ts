/**
 * Issue 14, findings 7, 8a and 8e on the real service: what a proxy token can learn about other
 * clients, what a web page can make the API do (DNS rebinding, cross-site requests, with
 * authentication on and with AUTH_DISABLED), and what the dashboard's responses allow a browser.
 * Each failed on 0.1.0: a proxy token read another address's session, a foreign Host minted an
 * admin token that outlived AUTH_DISABLED, a cross-site text/plain POST quarantined an instance,
 * and the compiled dashboard sources were served with no security header.
 */
import { expect } from 'chai';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { TokenRecord } from '../../shared/auth/token-record.js';
import type { InstanceView, SessionView } from '../../shared/api/views.js';
import { SignInCredentials } from '../../workers/api/auth/sign-in-credentials.js';
import { AuthStore } from '../../supervisor/auth/auth-store.js';
import { curlSocks } from '../support/clients/curl.js';
import { apiJson, sessionWhen } from '../support/clients/api-reads.js';
import { socksHttpGet } from '../support/clients/socks5-client.js';
import { rawHttp } from '../support/network/raw-http.js';
import { quietLogger } from '../support/fakes/quiet-logger.js';
import { TEST_ADMIN_PASSWORD, TEST_PROXY_TOKEN, startService, type RunningService, withService } from '../support/fixtures/service.js';

/**
 * What a reader of DATA_DIR can do with a copy of it: open it as exitpool itself does and sign
 * an admin credential with the key that results (the admin password is the one configured, the
 * worst case: an attacker who also knows it, or a generated one whose digest is in the copy).
 */
async function credentialForgedFromCopyOf(dataDir: string): Promise<string> {
  const copy = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-e2e-stolen-'));
  try {
    // The credential files (tor's directories are no help to a forger).
    for (const name of fs.readdirSync(dataDir)) {
      if (fs.statSync(path.join(dataDir, name)).isFile()) fs.copyFileSync(path.join(dataDir, name), path.join(copy, name));
    }
    const { store } = await AuthStore.open({
      config: { adminUser: 'admin', adminPassword: TEST_ADMIN_PASSWORD, proxyToken: null, authDisabled: false, dataDir: copy },
      log: quietLogger(),
      bcryptCost: 4,
    });
    return new SignInCredentials(store.snapshots().api.signingKey, 'admin', 3_600_000).issueSession().token;
  } finally {
    fs.rmSync(copy, { recursive: true, force: true });
  }
}

/** What a page on another site sends with a simple (preflight-free) POST. */
const CROSS_SITE = { origin: 'http://attacker.example', 'sec-fetch-site': 'cross-site', 'content-type': 'text/plain' };

describe('API access from other clients and other sites (authentication on)', function () {
  this.timeout(240_000);
  let admin: string;
  let host: string;

  const suite = withService({ POOL_SIZE: '1' }, { ready: 1, readyTimeoutMs: 120_000 });
  before(async () => {
    admin = await suite.svc.login();
    host = `127.0.0.1:${suite.svc.apiPort}`;
  });

  it("a proxy token cannot read, rotate, report on or delete another client address's session (8e)", async () => {
    const target = { host: 'whoami.testnet', targetPort: suite.svc.net.whoami.port };
    const other = await socksHttpGet({ port: suite.svc.socksPort, ...target, username: '', password: TEST_PROXY_TOKEN, localAddress: '127.0.0.2' });
    expect(other.outcome.kind).to.equal('open');
    const mine = await socksHttpGet({ port: suite.svc.socksPort, ...target, username: '', password: TEST_PROXY_TOKEN });
    expect(mine.outcome.kind).to.equal('open');
    await sessionWhen(suite.svc, 'ip:127.0.0.2', admin, 'the other address session accounted', (s) => s.requests === 1);

    const unknown = await suite.svc.api('/api/sessions/ip:127.0.0.99', { bearer: TEST_PROXY_TOKEN });
    const unknownText = await unknown.text();
    expect(unknown.status).to.equal(404);
    for (const [method, suffix] of [['GET', ''], ['POST', '/rotate'], ['POST', '/failure'], ['DELETE', '']] as const) {
      const r = await suite.svc.api(`/api/sessions/ip:127.0.0.2${suffix}`, { method, bearer: TEST_PROXY_TOKEN, ...(suffix === '/failure' ? { body: { kind: 'captcha' } } : {}) });
      expect([r.status, await r.text()], `${method} ip:127.0.0.2${suffix}`).to.deep.equal([404, unknownText]);
    }
    // Nothing happened to it: still there, nothing reported, not rotated.
    const seen = await apiJson<SessionView>(suite.svc, '/api/sessions/ip:127.0.0.2', admin);
    expect(seen).to.include({ key: 'ip:127.0.0.2', requests: 1, failures: 0 });
    // A proxy token still addresses its own address session.
    const own = await suite.svc.api('/api/sessions/ip:127.0.0.1', { bearer: TEST_PROXY_TOKEN });
    expect(own.status).to.equal(200);
  });

  it('refuses a foreign Host (DNS rebinding) and cross-site state changes, even with a valid credential (7)', async () => {
    const rebound = await rawHttp(`http://${host}`, 'GET', '/api/pool', { host: `attacker.example:${suite.svc.apiPort}`, authorization: `Bearer ${admin}` });
    expect(rebound.status, rebound.text).to.equal(403);
    const crossSite = await rawHttp(`http://${host}`, 'POST', '/api/instances/0/quarantine', { host, authorization: `Bearer ${admin}`, ...CROSS_SITE }, 'x');
    expect(crossSite.status, crossSite.text).to.equal(403);
    expect((await apiJson<InstanceView>(suite.svc, '/api/instances/0', admin)).health.state).to.not.equal('quarantined');
    // curl, which sends neither Origin nor Sec-Fetch-Site, is a non-browser client and passes.
    const r = await curlSocks(suite.svc.socksPort, 'still-works', TEST_PROXY_TOKEN, suite.svc.whoamiUrl);
    expect(r.code, r.stderr).to.equal(0);
  });

  it('keeps the signing secret out of auth.json, in a 0600 signing.key; a copy of DATA_DIR still signs in without SIGNING_SECRET (8g)', async () => {
    const auth = JSON.parse(fs.readFileSync(path.join(suite.svc.dataDir, 'auth.json'), 'utf8')) as Record<string, unknown>;
    expect(auth).to.not.have.property('signingSecret');
    expect(fs.statSync(path.join(suite.svc.dataDir, 'signing.key')).mode & 0o777).to.equal(0o600);
    // Documented, not hidden: without SIGNING_SECRET the directory holds every input of the key.
    const forged = await credentialForgedFromCopyOf(suite.svc.dataDir);
    expect((await suite.svc.api('/api/pool', { bearer: forged })).status).to.equal(200);
  });

  it('serves the dashboard with CSP, frame, sniffing and referrer headers, and never its compiled sources or maps (8a)', async () => {
    const page = await suite.svc.api('/');
    expect(page.status).to.equal(200);
    const csp = page.headers.get('content-security-policy') ?? '';
    for (const directive of ["default-src 'self'", "object-src 'none'", "base-uri 'none'", "frame-ancestors 'none'"]) expect(csp).to.contain(directive);
    expect(page.headers.get('x-frame-options')).to.equal('DENY');
    expect(page.headers.get('x-content-type-options')).to.equal('nosniff');
    expect(page.headers.get('referrer-policy')).to.equal('no-referrer');
    // The build puts tsc's output of the dashboard's sources, with maps, next to the bundle.
    const dashboardDir = path.join(path.dirname(new URL(import.meta.url).pathname), '..', '..', 'dashboard');
    const compiled = fs.readdirSync(path.join(dashboardDir, 'src', 'logic')).filter((f) => f.endsWith('.js'));
    expect(compiled.length, 'compiled dashboard sources exist in the build').to.be.greaterThan(0);
    for (const p of [`/src/logic/${compiled[0]}`, `/src/logic/${compiled[0]}.map`, '/src/']) {
      const r = await suite.svc.api(p);
      expect(r.status, p).to.equal(404);
    }
    for (const asset of fs.readdirSync(path.join(dashboardDir, 'assets'))) {
      const r = await suite.svc.api(`/assets/${asset}.map`);
      expect(r.status, `${asset}.map`).to.equal(404);
    }
  });
});

describe('SIGNING_SECRET: a copy of DATA_DIR forges nothing', function () {
  this.timeout(240_000);
  let svc: RunningService;
  let dataDir: string;

  before(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-e2e-signing-'));
    svc = await startService({ POOL_SIZE: '1', DATA_DIR: dataDir, SIGNING_SECRET: 'an operator secret that is long enough 0123456789' });
    await svc.waitReady(1, 120_000);
  });
  after(async () => {
    expect(await svc?.stop()).to.equal(0);
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('signs in as usual, writes no secret to DATA_DIR, and refuses a credential signed from a copy of it', async () => {
    const real = await svc.login();
    expect((await svc.api('/api/pool', { bearer: real })).status).to.equal(200);
    expect(fs.existsSync(path.join(dataDir, 'signing.key'))).to.equal(false);
    const forged = await credentialForgedFromCopyOf(dataDir);
    const r = await svc.api('/api/pool', { bearer: forged });
    expect(r.status).to.equal(401);
  });
});

describe('AUTH_DISABLED: a web page cannot drive the API', function () {
  this.timeout(300_000);
  let svc: RunningService;
  let dataDir: string;
  let base: string;

  before(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-e2e-authoff-'));
    svc = await startService({ POOL_SIZE: '1', AUTH_DISABLED: '1', DATA_DIR: dataDir });
    await svc.waitReady(1, 120_000);
    base = `http://127.0.0.1:${svc.apiPort}`;
  });
  after(async () => {
    expect(await svc?.stop()).to.equal(0);
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('refuses a cross-site text/plain POST: the instance is not quarantined', async () => {
    const r = await rawHttp(base, 'POST', '/api/instances/0/quarantine', { host: `127.0.0.1:${svc.apiPort}`, ...CROSS_SITE }, '{}');
    expect(r.status, r.text).to.equal(403);
    expect(r.text).to.match(/cross-site request refused/);
    expect((await apiJson<InstanceView>(svc, '/api/instances/0', undefined)).health.state).to.not.equal('quarantined');
  });

  it('refuses a foreign Host; a token minted meanwhile is marked and does not outlive AUTH_DISABLED', async () => {
    const body = JSON.stringify({ name: 'minted-by-a-page', scope: 'admin' });
    const rebound = await rawHttp(base, 'POST', '/api/tokens', { host: `attacker.example:${svc.apiPort}`, 'content-type': 'application/json' }, body);
    expect(rebound.status, rebound.text).to.equal(403);
    expect((await apiJson<TokenRecord[]>(svc, '/api/tokens', undefined)).map((t) => t.name)).to.not.include('minted-by-a-page');

    const minted = await rawHttp(base, 'POST', '/api/tokens', { host: `127.0.0.1:${svc.apiPort}`, 'content-type': 'application/json' }, body);
    expect(minted.status, minted.text).to.equal(201);
    const token = JSON.parse(minted.text) as TokenRecord & { secret: string };
    expect(token.source).to.equal('auth-disabled');
    expect(fs.readFileSync(path.join(dataDir, 'auth.json'), 'utf8')).to.not.contain(token.id);

    // Restart with authentication on, same DATA_DIR: the token is gone on the API and the proxy.
    expect(await svc.stop()).to.equal(0);
    svc = await startService({ POOL_SIZE: '1', DATA_DIR: dataDir });
    await svc.waitReady(1, 120_000);
    const admin = await svc.login();
    expect((await apiJson<TokenRecord[]>(svc, '/api/tokens', admin)).map((t) => t.id)).to.not.include(token.id);
    expect((await svc.api('/api/pool', { bearer: token.secret })).status).to.equal(401);
    const viaProxy = await curlSocks(svc.socksPort, 'minted', token.secret, svc.whoamiUrl);
    expect(viaProxy.code, 'proxy refuses the minted token').to.not.equal(0);
  });
});
