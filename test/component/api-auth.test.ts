import { expect } from 'chai';
import type { Logger } from '../../shared/logger.js';
import { MAX_JSON_BODY_BYTES } from '../../workers/api/api-app.js';
import { MAX_TOKEN_NAME_LENGTH } from '../../shared/auth/token-request.js';
import { TICKET_TTL_MS } from '../../workers/api/auth/sign-in-credentials.js';
import {
  ADMIN_PASSWORD,
  ADMIN_USER,
  LOGIN_TTL_MS,
  PROXY_TOKEN,
  startApiHarness,
  undocumentedResponses,
  type ApiHarness,
  type ApiResponse,
} from '../support/fixtures/api-harness.js';
import { waitFor } from '../support/waiting.js';

/**
 * The authentication endpoints of the real app (docs/api.md, "Authentication endpoints", "Tokens"): status, login
 * with its rate limit, the stream ticket, and token issue/list/revoke through the real
 * credential store and AuthOperations, whose snapshot push reaches this app over IPC.
 */

function expectPlainError(r: ApiResponse, status: number, what: string): void {
  expect(r.status, `${what}: ${r.text}`).to.equal(status);
  expect(r.headers.get('content-type'), what).to.match(/^text\/plain/);
}

describe('API authentication endpoints', function () {
  let h: ApiHarness;
  before(async () => {
    h = await startApiHarness();
  });
  after(async () => h.close());

  describe('GET /api/auth/status', () => {
    it('answers required and the configured user, the same for every caller', async () => {
      const answers = [
        await h.request('/api/auth/status'),
        await h.request('/api/auth/status', { bearer: h.adminToken }),
        await h.request('/api/auth/status', { bearer: 'tp_0000000000000000000000' }),
        await h.request('/api/auth/status', { headers: { authorization: 'garbage' } }),
      ];
      for (const r of answers) {
        expect(r.status).to.equal(200);
        expect(r.text).to.equal(answers[0]!.text);
      }
      expect(answers[0]!.json()).to.deep.equal({ required: true, user: ADMIN_USER });
    });
  });

  describe('POST /api/auth/login', () => {
    it('answers a session credential that expires after LOGIN_TTL, and notifies the supervisor for the audit log', async () => {
      const before = Math.floor(Date.now() / 1000);
      const r = await h.request('/api/auth/login', { method: 'POST', body: { user: ADMIN_USER, password: ADMIN_PASSWORD } });
      expect(r.status).to.equal(200);
      const body = r.json() as { token: string; expires: number; user: string };
      expect(body.user).to.equal(ADMIN_USER);
      expect(body.expires).to.be.within(before + LOGIN_TTL_MS / 1000 - 1, before + LOGIN_TTL_MS / 1000 + 2);
      expect((await h.request('/api/pool', { bearer: body.token })).status).to.equal(200);
      await waitFor('the signed-in notice', () => h.fake.signIns.length > 0);
      expect(h.fake.signIns.at(-1)).to.deep.equal({ user: ADMIN_USER, address: '127.0.0.1' });
    });

    it('answers a wrong user and a wrong password identically (401 with a challenge)', async () => {
      const wrongPassword = await h.request('/api/auth/login', { method: 'POST', body: { user: ADMIN_USER, password: 'nope' } });
      const wrongUser = await h.request('/api/auth/login', { method: 'POST', body: { user: 'someone', password: ADMIN_PASSWORD } });
      for (const r of [wrongPassword, wrongUser]) {
        expectPlainError(r, 401, 'refused sign-in');
        expect(r.headers.get('www-authenticate')).to.equal('Bearer realm="exitpool"');
      }
      expect(wrongUser.text).to.equal(wrongPassword.text);
      await h.login(); // a success forgives the failures
    });

    it('refuses malformed bodies with 400', async () => {
      const bodies: unknown[] = [{}, { user: ADMIN_USER }, { password: ADMIN_PASSWORD }, { user: 5, password: 'x' }, { user: '', password: 'x' }, { user: 'u'.repeat(129), password: 'x' }, [ADMIN_USER, ADMIN_PASSWORD], 'x', null];
      for (const body of bodies) expectPlainError(await h.request('/api/auth/login', { method: 'POST', body }), 400, `login ${JSON.stringify(body)}`);
      expectPlainError(await h.request('/api/auth/login', { method: 'POST' }), 400, 'login without a body');
      expectPlainError(await h.request('/api/auth/login', { method: 'POST', rawBody: '{"user": "a", ' }), 400, 'login with malformed JSON');
      expectPlainError(await h.request('/api/auth/login', { method: 'POST', body: { user: ADMIN_USER, password: 'p'.repeat(MAX_JSON_BODY_BYTES) } }), 400, 'login with an oversized body');
    });
  });

  describe('POST /api/auth/ticket', () => {
    it(`answers a ticket valid for ${TICKET_TTL_MS / 1000} seconds to a session credential`, async () => {
      const r = await h.request('/api/auth/ticket', { method: 'POST', bearer: await h.login() });
      expect(r.status).to.equal(200);
      expect(r.json()).to.have.keys(['ticket', 'expires_in']);
      expect((r.json() as { expires_in: number }).expires_in).to.equal(TICKET_TTL_MS / 1000);
    });

    it('refuses tokens of either scope with 403 (no challenge), and a ticket with 401', async () => {
      for (const token of [h.adminToken, h.storeProxyToken, PROXY_TOKEN]) {
        const r = await h.request('/api/auth/ticket', { method: 'POST', bearer: token });
        expectPlainError(r, 403, 'ticket for a token');
        expect(r.headers.get('www-authenticate')).to.equal(null);
      }
      const fromTicket = await h.request('/api/auth/ticket', { method: 'POST', bearer: await h.ticket() });
      expectPlainError(fromTicket, 401, 'ticket for a ticket');
      expect(fromTicket.headers.get('www-authenticate')).to.match(/^Bearer realm="exitpool"/);
    });
  });

  describe('tokens', () => {
    it('GET /api/tokens lists PROXY_TOKEN first, then the store, never a secret', async () => {
      const r = await h.request('/api/tokens', { bearer: h.adminToken });
      expect(r.status).to.equal(200);
      const list = r.json() as Record<string, unknown>[];
      expect(list[0]).to.include({ name: 'PROXY_TOKEN', scope: 'proxy', source: 'config' });
      expect(list.slice(1).map((t) => t.source)).to.deep.equal(['store', 'store']);
      for (const t of list) expect(t).to.have.keys(['id', 'name', 'scope', 'source', 'created_at', 'owner']);
      expect(r.text).to.not.contain('tp_');
    });

    it('POST /api/tokens answers 201 with the secret once; the token works at once with its scope', async () => {
      const proxy = await h.request('/api/tokens', { method: 'POST', bearer: h.adminToken, body: { name: 'scraper', scope: 'proxy' } });
      expect(proxy.status).to.equal(201);
      const p = proxy.json() as { id: string; secret: string; scope: string; source: string };
      expect(p).to.include({ scope: 'proxy', source: 'store', name: 'scraper' });
      expect(p.secret).to.match(/^tp_[A-Za-z0-9]{22}$/);
      expect((await h.request('/api/sessions/alice', { bearer: p.secret })).status).to.equal(200);
      expectPlainError(await h.request('/api/pool', { bearer: p.secret }), 403, 'a new proxy token on an admin route');

      const admin = await h.request('/api/tokens', { method: 'POST', bearer: await h.login(), body: { name: 'ops', scope: 'admin' } });
      expect(admin.status).to.equal(201);
      const a = admin.json() as { id: string; secret: string };
      expect((await h.request('/api/pool', { bearer: a.secret })).status).to.equal(200);

      const listed = (await h.request('/api/tokens', { bearer: a.secret })).json() as { id: string }[];
      expect(listed.map((t) => t.id)).to.include.members([p.id, a.id]);
      expect(JSON.stringify(listed)).to.not.contain(p.secret);
      expect(h.audit.recent(2).map((e) => e.message)).to.deep.equal([`token ${a.id} (admin) issued`, `token ${p.id} (proxy) issued`]);
    });

    it('POST /api/tokens refuses bad names, scopes and bodies with 400', async () => {
      const before = (await h.request('/api/tokens', { bearer: h.adminToken })).text;
      const bodies: unknown[] = [
        {},
        { name: 'x' },
        { scope: 'proxy' },
        { name: '', scope: 'proxy' },
        { name: '   ', scope: 'proxy' },
        { name: 5, scope: 'proxy' },
        { name: 'n'.repeat(MAX_TOKEN_NAME_LENGTH + 1), scope: 'proxy' },
        { name: 'line\nbreak', scope: 'proxy' },
        { name: 'x', scope: 'root' },
        { name: 'x', scope: ['admin'] },
        ['x', 'proxy'],
        'x',
      ];
      for (const body of bodies) expectPlainError(await h.request('/api/tokens', { method: 'POST', bearer: h.adminToken, body }), 400, `create ${JSON.stringify(body)}`);
      expectPlainError(await h.request('/api/tokens', { method: 'POST', bearer: h.adminToken }), 400, 'create without a body');
      expectPlainError(await h.request('/api/tokens', { method: 'POST', bearer: h.adminToken, rawBody: '{"name":' }), 400, 'create with malformed JSON');
      expectPlainError(await h.request('/api/tokens', { method: 'POST', bearer: h.adminToken, body: { name: 'x', scope: 'proxy', pad: 'x'.repeat(MAX_JSON_BODY_BYTES) } }), 400, 'create with an oversized body');
      expect((await h.request('/api/tokens', { bearer: h.adminToken })).text).to.equal(before);
    });

    it('DELETE /api/tokens/{id} revokes at once (204, empty); 404 for an unknown id; 409 for PROXY_TOKEN', async () => {
      const created = (await h.request('/api/tokens', { method: 'POST', bearer: h.adminToken, body: { name: 'short-lived', scope: 'admin' } })).json() as { id: string; secret: string };
      expect((await h.request('/api/pool', { bearer: created.secret })).status).to.equal(200);
      const r = await h.request(`/api/tokens/${created.id}`, { method: 'DELETE', bearer: h.adminToken });
      expect(r.status).to.equal(204);
      expect(r.text).to.equal('');
      const after = await h.request('/api/pool', { bearer: created.secret });
      expectPlainError(after, 401, 'a revoked token');
      expect(after.headers.get('www-authenticate')).to.equal('Bearer realm="exitpool", error="invalid_token"');
      expectPlainError(await h.request(`/api/tokens/${created.id}`, { method: 'DELETE', bearer: h.adminToken }), 404, 'revoke twice');
      expectPlainError(await h.request('/api/tokens/doesNotExist', { method: 'DELETE', bearer: h.adminToken }), 404, 'revoke an unknown id');

      const config = ((await h.request('/api/tokens', { bearer: h.adminToken })).json() as { id: string; source: string }[]).find((t) => t.source === 'config');
      expect(config).to.not.equal(undefined);
      expectPlainError(await h.request(`/api/tokens/${config!.id}`, { method: 'DELETE', bearer: h.adminToken }), 409, 'revoke PROXY_TOKEN');
      expect((await h.request('/api/sessions/alice', { bearer: PROXY_TOKEN })).status).to.equal(200);
    });
  });

  describe('docs/openapi.yaml', () => {
    it('documents every response above (status, media type, schema)', () => {
      expect(h.observed.length).to.be.greaterThan(40);
      expect(undocumentedResponses(h)).to.deep.equal([]);
    });
  });
});

describe('API sign-in rate limit (LOGIN_RATE_LIMIT)', function () {
  let h: ApiHarness;
  const attempts = 3;
  const windowMs = 60_000;
  const lines: { level: string; message: string; fields: Record<string, unknown> }[] = [];
  const line = (level: string) => (message: string, fields: Record<string, unknown> = {}) => lines.push({ level, message, fields });
  const log = { log: (level: string, message: string, fields: Record<string, unknown>) => lines.push({ level, message, fields }), info: line('info'), warn: line('warn'), debug: line('debug'), error: line('error') };
  before(async () => {
    h = await startApiHarness({ loginRateLimit: { attempts, windowMs }, log: log as unknown as Logger });
  });
  after(async () => h.close());

  it('answers 429 with Retry-After after repeated failures from one address, even to the right password, until the window ends', async () => {
    for (let i = 0; i < attempts; i++) {
      expectPlainError(await h.request('/api/auth/login', { method: 'POST', body: { user: ADMIN_USER, password: `wrong${i}` } }), 401, `failure ${i + 1}`);
    }
    for (const password of ['wrong again', ADMIN_PASSWORD]) {
      const limited = await h.request('/api/auth/login', { method: 'POST', body: { user: ADMIN_USER, password } });
      expectPlainError(limited, 429, 'over the limit');
      const retryAfter = Number(limited.headers.get('retry-after'));
      expect(Number.isInteger(retryAfter)).to.equal(true);
      expect(retryAfter).to.be.within(1, windowMs / 1000);
    }
    // Bad bodies are refused before they count, and still get their 400.
    expectPlainError(await h.request('/api/auth/login', { method: 'POST', body: { user: ADMIN_USER } }), 400, 'bad body while limited');
    h.clock.now += windowMs + 1000;
    expect((await h.request('/api/auth/login', { method: 'POST', body: { user: ADMIN_USER, password: ADMIN_PASSWORD } })).status).to.equal(200);
  });

  it('logged sign-ins, refusals and rate limits, never the password nor the user name tried', () => {
    const text = JSON.stringify(lines);
    expect(lines.some((l) => l.message === 'signed in' && l.fields.user === ADMIN_USER && l.fields.address === '127.0.0.1')).to.equal(true);
    expect(lines.some((l) => l.level === 'warn' && l.message.startsWith('sign-in refused: wrong') && l.fields.address === '127.0.0.1')).to.equal(true);
    expect(lines.some((l) => l.level === 'warn' && l.message.includes('LOGIN_RATE_LIMIT') && typeof l.fields.retryAfterSeconds === 'number')).to.equal(true);
    for (const secret of [ADMIN_PASSWORD, 'wrong0', 'wrong again']) expect(text).to.not.contain(secret);
  });

  it('documents every response above', () => {
    expect(undocumentedResponses(h)).to.deep.equal([]);
  });
});
