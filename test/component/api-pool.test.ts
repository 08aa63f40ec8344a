import { expect } from 'chai';
import fc from 'fast-check';
import { MAX_POOL_SIZE } from '../../shared/config/config.js';
import type { InstanceAction } from '../../shared/ipc/protocol.js';
import { MAX_JSON_BODY_BYTES } from '../../workers/api/api-app.js';
import { EVENTS_DEFAULT_LIMIT, EVENTS_MAX_LIMIT } from '../../workers/api/route-table.js';
import { cannedData, cannedHealth, refuse } from '../support/fakes/supervisor-ipc.js';
import { fuzzRuns } from '../support/fixtures/fuzz-runs.js';
import { startApiHarness, undocumentedResponses, type ApiHarness, type ApiResponse } from '../support/fixtures/api-harness.js';

/**
 * Pool, instance, session, event and statistics endpoints of the real app: success status and
 * body, the IPC request each one makes, and every 400/404/409 it can answer (docs/api.md, "Endpoints",
 * "Errors"). Bad input is refused before anything reaches the supervisor.
 */

const ACTIONS: InstanceAction[] = ['rotate', 'restart', 'quarantine', 'release', 'drain'];
const BAD_INSTANCE_IDS = ['abc', '-1', '1.5', '1234567', '0x1', '%20'];

function expectPlainError(r: ApiResponse, status: number, what: string): void {
  expect(r.status, `${what}: ${r.text}`).to.equal(status);
  expect(r.headers.get('content-type'), what).to.match(/^text\/plain/);
  expect(r.text.length, what).to.be.greaterThan(1);
  expect(() => JSON.parse(r.text), what).to.throw();
}

describe('API pool, instances, sessions, events and statistics', function () {
  let h: ApiHarness;
  let jwt: string;
  before(async () => {
    h = await startApiHarness();
    jwt = await h.login();
  });
  beforeEach(() => {
    h.fake.data = cannedData();
    h.fake.restore();
  });
  after(async () => h.close());

  const get = (path: string, bearer = jwt): Promise<ApiResponse> => h.request(path, { bearer });
  const post = (path: string, body?: unknown, bearer = jwt): Promise<ApiResponse> =>
    h.request(path, { method: 'POST', bearer, ...(body === undefined ? {} : { body }) });
  const postRaw = (path: string, rawBody: string, headers: Record<string, string> = {}): Promise<ApiResponse> =>
    h.request(path, { method: 'POST', bearer: jwt, rawBody, headers });

  /** Runs `fn` and asserts it made no IPC request of `method` (bad input changes nothing). */
  async function withoutIpc(method: Parameters<ApiHarness['fake']['callsOf']>[0], fn: () => Promise<void>): Promise<void> {
    const before = h.fake.callsOf(method).length;
    await fn();
    expect(h.fake.callsOf(method).length, `${method} must not be called`).to.equal(before);
  }

  describe('GET /api/pool', () => {
    it('answers the pool summary as JSON', async () => {
      const r = await get('/api/pool');
      expect(r.status).to.equal(200);
      expect(r.headers.get('content-type')).to.match(/^application\/json/);
      expect(r.json()).to.deep.equal(h.fake.data.pool);
      expect(r.json()).to.have.keys(['version', 'size', 'ready', 'routable', 'sessions', 'spares', 'totals', 'socks_port', 'http_port', 'config']);
    });
  });

  describe('POST /api/pool/resize', () => {
    it('answers 202 with the resize result and asks the supervisor once', async () => {
      const down = await post('/api/pool/resize', { size: 2 });
      expect(down.status).to.equal(202);
      expect(down.json()).to.deep.equal({ size: 2, previous: 3, adding: [], removing: [2] });
      const up = await post('/api/pool/resize', { size: 5 });
      expect(up.status).to.equal(202);
      expect(up.json()).to.deep.equal({ size: 5, previous: 3, adding: [3, 4], removing: [] });
      expect(h.fake.callsOf('pool.resize').slice(-2)).to.deep.equal([{ size: 2 }, { size: 5 }]);
      // A JSON body under another JSON media type is read too.
      const vendor = await postRaw('/api/pool/resize', '{"size": 3}', { 'content-type': 'application/merge-patch+json' });
      expect(vendor.status).to.equal(202);
    });

    it('refuses bad sizes, bad JSON, wrong types and oversized bodies with 400 before the supervisor sees them', async () => {
      await withoutIpc('pool.resize', async () => {
        for (const body of [{ size: 0 }, { size: MAX_POOL_SIZE + 1 }, { size: -3 }, { size: 2.5 }, { size: '3' }, { size: null }, {}, [3], 3, 'big', null]) {
          expectPlainError(await post('/api/pool/resize', body), 400, `resize ${JSON.stringify(body)}`);
        }
        expectPlainError(await post('/api/pool/resize'), 400, 'resize without a body');
        expectPlainError(await postRaw('/api/pool/resize', '{"size": 3'), 400, 'resize with malformed JSON');
        expectPlainError(await postRaw('/api/pool/resize', 'size=3', { 'content-type': 'text/plain' }), 400, 'resize as text');
        const big = await postRaw('/api/pool/resize', JSON.stringify({ size: 3, pad: 'x'.repeat(MAX_JSON_BODY_BYTES) }));
        expectPlainError(big, 400, 'resize with an oversized body');
        expect(big.text).to.contain(String(MAX_JSON_BODY_BYTES));
        expectPlainError(await postRaw('/api/pool/resize', 'not gzip', { 'content-encoding': 'gzip' }), 400, 'resize with a broken gzip body');
        expectPlainError(await postRaw('/api/pool/resize', '{}', { 'content-encoding': 'compress' }), 400, 'resize with an unknown encoding');
        expectPlainError(await postRaw('/api/pool/resize', '{}', { 'content-type': 'application/json; charset=latin9' }), 400, 'resize with an unknown charset');
      });
      const atBounds = [await post('/api/pool/resize', { size: 1 }), await post('/api/pool/resize', { size: MAX_POOL_SIZE })];
      expect(atBounds.map((r) => r.status)).to.deep.equal([202, 202]);
    });

    it("passes the supervisor's refusal through as plain text", async () => {
      h.fake.answer('pool.resize', () => refuse('EXITPOOL_INVALID_REQUEST', 'size must be from 1 to 64'));
      expectPlainError(await post('/api/pool/resize', { size: 3 }), 400, 'refused resize');
    });
  });

  describe('POST /api/pool/rotate', () => {
    it('answers the sweep result', async () => {
      const r = await post('/api/pool/rotate');
      expect(r.status).to.equal(200);
      expect(r.json()).to.deep.equal({ rotating: 2, in_progress: true });
      h.fake.data.poolRotate = { rotating: 0, in_progress: true };
      expect((await post('/api/pool/rotate')).json()).to.deep.equal({ rotating: 0, in_progress: true });
    });
  });

  describe('instances', () => {
    it('GET /api/instances lists every instance with its health and the draining/rotating flags', async () => {
      const r = await get('/api/instances');
      expect(r.status).to.equal(200);
      const list = r.json() as Record<string, unknown>[];
      expect(list.map((i) => i.id)).to.deep.equal([0, 1, 2]);
      for (const i of list) expect(i).to.include.keys(['health', 'totals', 'draining', 'rotating', 'exit_ip', 'retired_exit_ip', 'pinned_exit']);
    });

    it('GET /api/instances/{id} answers one; 404 for an unknown id; 400 for a malformed one', async () => {
      const r = await get('/api/instances/1');
      expect(r.status).to.equal(200);
      expect(r.json()).to.deep.equal(h.fake.data.instances[1]);
      expectPlainError(await get('/api/instances/9'), 404, 'unknown instance');
      await withoutIpc('instances.get', async () => {
        for (const id of BAD_INSTANCE_IDS) expectPlainError(await get(`/api/instances/${id}`), 400, `instance id ${id}`);
      });
    });

    it('every action answers the resulting instance and sends one instances.action', async () => {
      for (const action of ACTIONS) {
        const r = await post(`/api/instances/0/${action}`);
        expect(r.status, `${action}: ${r.text}`).to.equal(200);
        expect((r.json() as { id: number }).id).to.equal(0);
        const last = h.fake.callsOf('instances.action').at(-1);
        expect(last).to.deep.equal(action === 'restart' ? { id: 0, action, wipe: true } : { id: 0, action });
      }
      expect((await post('/api/instances/0/drain')).json()).to.include({ draining: true });
      expect((await post('/api/instances/0/rotate')).json()).to.include({ rotating: true });
      expect(((await post('/api/instances/0/quarantine')).json() as { health: { state: string } }).health.state).to.equal('quarantined');
    });

    it('restart reads wipe (default true; true/1/false/0) and refuses anything else', async () => {
      const wipes: [string, boolean][] = [['', true], ['?wipe=true', true], ['?wipe=1', true], ['?wipe=false', false], ['?wipe=0', false]];
      for (const [query, wipe] of wipes) {
        expect((await post(`/api/instances/1/restart${query}`)).status).to.equal(200);
        expect(h.fake.callsOf('instances.action').at(-1)).to.deep.equal({ id: 1, action: 'restart', wipe });
      }
      await withoutIpc('instances.action', async () => {
        for (const q of ['?wipe=yes', '?wipe=', '?wipe=TRUE', '?wipe=true&wipe=false']) expectPlainError(await post(`/api/instances/1/restart${q}`), 400, `restart${q}`);
      });
    });

    it('every action: 404 for an unknown id, 400 for a malformed one', async () => {
      for (const action of ACTIONS) {
        expectPlainError(await post(`/api/instances/7/${action}`), 404, `${action} on an unknown instance`);
        await withoutIpc('instances.action', async () => {
          for (const id of BAD_INSTANCE_IDS) expectPlainError(await post(`/api/instances/${id}/${action}`), 400, `${action} on id ${id}`);
        });
      }
    });

    it('409 when the state makes the action impossible (rotate before bootstrap, quarantine twice)', async () => {
      const rotate = await post('/api/instances/2/rotate');
      expectPlainError(rotate, 409, 'rotate before bootstrap');
      expect(rotate.text).to.match(/bootstrap/);
      h.fake.data.instances[1]!.health = cannedHealth({ state: 'quarantined' });
      expectPlainError(await post('/api/instances/1/quarantine'), 409, 'quarantine a quarantined instance');
      for (const action of ['restart', 'release', 'drain'] as const) {
        h.fake.answer('instances.action', () => refuse('EXITPOOL_INSTANCE_STATE', 'instance 1 is being removed by a resize'));
        expectPlainError(await post(`/api/instances/1/${action}`), 409, `${action} during a resize`);
      }
    });
  });

  describe('sessions', () => {
    it('GET /api/sessions lists them (admin)', async () => {
      const r = await get('/api/sessions', h.adminToken);
      expect(r.status).to.equal(200);
      expect((r.json() as { key: string }[]).map((s) => s.key)).to.deep.equal(['alice', 'bob']);
    });

    it('GET /api/sessions/{key} answers one to a proxy token; session_port only with session ports on', async () => {
      const r = await get('/api/sessions/alice', h.storeProxyToken);
      expect(r.status).to.equal(200);
      expect(r.json()).to.deep.equal(h.fake.data.sessions[0]);
      expect(r.json()).to.not.have.property('session_port');
      h.fake.data.sessionPortBase = 20_000;
      expect((await get('/api/sessions/bob', h.storeProxyToken)).json()).to.include({ key: 'bob', instance: 1, session_port: 20_001 });
      expectPlainError(await get('/api/sessions/carol', h.storeProxyToken), 404, 'unknown session');
    });

    it("a proxy token addresses only its own ip: session: another address's answers as an unknown key does", async () => {
      const ipSession = (address: string) => ({ ...h.fake.data.sessions[0]!, key: `ip:${address}` });
      h.fake.data.sessions.push(ipSession('127.0.0.1'), ipSession('10.9.8.7'));
      const unknown = await get('/api/sessions/never-used', h.storeProxyToken);
      const mine = await get('/api/sessions/ip:127.0.0.1', h.storeProxyToken);
      expect(mine.status).to.equal(200);
      expect(mine.json()).to.include({ key: 'ip:127.0.0.1' });
      const calls = h.fake.calls.length;
      for (const [method, suffix] of [['GET', ''], ['POST', '/rotate'], ['POST', '/failure'], ['DELETE', '']] as const) {
        for (const key of ['ip:10.9.8.7', 'ip:127.0.0.2', 'ip:', 'ip:::1']) {
          const r = await h.request(`/api/sessions/${encodeURIComponent(key)}${suffix}`, { method, bearer: h.storeProxyToken });
          expect([r.status, r.text], `${method} ${key}${suffix}`).to.deep.equal([unknown.status, unknown.text]);
        }
      }
      expect(h.fake.calls.length, 'refused before the supervisor is asked').to.equal(calls);
      // The admin sees and acts on every address session.
      expect((await get('/api/sessions/ip:10.9.8.7', h.adminToken)).status).to.equal(200);
      expect((await h.request('/api/sessions/ip:10.9.8.7', { method: 'DELETE', bearer: h.adminToken })).status).to.equal(204);
    });

    it('property: a proxy token never reaches the supervisor with a foreign ip: key', async () => {
      await fc.assert(
        fc.asyncProperty(fc.string({ maxLength: 40 }), async (rest) => {
          const key = `ip:${rest}`;
          fc.pre(key !== 'ip:127.0.0.1');
          const before = h.fake.callsOf('sessions.get').length;
          const r = await get(`/api/sessions/${encodeURIComponent(key)}`, h.storeProxyToken);
          expect(r.status).to.be.oneOf([400, 404]);
          expect(h.fake.callsOf('sessions.get').length).to.equal(before);
        }),
        { numRuns: fuzzRuns(100) },
      );
    });

    it('decodes the key from the path; 400 for an over-long key or broken percent-encoding', async () => {
      h.fake.data.sessions.push({ ...h.fake.data.sessions[0]!, key: 'user/é 1' });
      expect((await get(`/api/sessions/${encodeURIComponent('user/é 1')}`)).status).to.equal(200);
      expect(h.fake.callsOf('sessions.get').at(-1)).to.deep.equal({ key: 'user/é 1' });
      await withoutIpc('sessions.get', async () => {
        expectPlainError(await get(`/api/sessions/${'k'.repeat(256)}`), 400, '256-byte key');
        expectPlainError(await get(`/api/sessions/${'é'.repeat(128)}`), 400, '256-byte key in two-byte characters');
        expectPlainError(await get('/api/sessions/%E0%A4%A'), 400, 'broken percent-encoding');
      });
      expect((await get(`/api/sessions/${'k'.repeat(255)}`)).status).to.equal(404);
    });

    it('POST /api/sessions/{key}/rotate answers where it went; newnym is true/1/false/0', async () => {
      const r = await post('/api/sessions/alice/rotate', undefined, h.storeProxyToken);
      expect(r.status).to.equal(200);
      expect(r.json()).to.deep.equal({ session: 'alice', instance: 1, exit_ip: '127.0.0.31', exit_confirmed: true, new_exit: true, exit_note: '' });
      const flags: [string, boolean][] = [['', false], ['?newnym=true', true], ['?newnym=1', true], ['?newnym=false', false], ['?newnym=0', false]];
      for (const [q, newnym] of flags) {
        expect((await post(`/api/sessions/alice/rotate${q}`, undefined, h.storeProxyToken)).status).to.equal(200);
        expect(h.fake.callsOf('sessions.rotate').at(-1)).to.deep.equal({ key: 'alice', newnym });
      }
      await withoutIpc('sessions.rotate', async () => {
        for (const q of ['?newnym=yes', '?newnym=2', '?newnym=', '?newnym=1&newnym=1']) expectPlainError(await post(`/api/sessions/alice/rotate${q}`), 400, `rotate${q}`);
      });
      expectPlainError(await post('/api/sessions/carol/rotate'), 404, 'rotate an unknown session');
    });

    it("rotate passes the supervisor's 409 and 503 through", async () => {
      h.fake.answer('sessions.rotate', () => refuse('EXITPOOL_NOT_BOOTSTRAPPED', 'instance 0 has not bootstrapped; it cannot be rotated yet'));
      expectPlainError(await post('/api/sessions/alice/rotate'), 409, 'rotate refused by state');
      h.fake.answer('sessions.rotate', () => refuse('EXITPOOL_NO_ROUTABLE_INSTANCE', 'no routable instance to rotate to'));
      expectPlainError(await post('/api/sessions/alice/rotate'), 503, 'nothing to rotate to');
    });

    it('POST /api/sessions/{key}/failure reads the report; a bodyless POST counts as other', async () => {
      const cases: [RequestInit['body'] | undefined, Record<string, string>, string][] = [
        [undefined, {}, 'other'],
        ['', { 'content-type': 'application/json' }, 'other'],
        ['{}', { 'content-type': 'application/json' }, 'other'],
        [JSON.stringify({ kind: 'captcha' }), { 'content-type': 'application/json' }, 'captcha'],
        [JSON.stringify({ reason: 'http_403' }), { 'content-type': 'application/json' }, 'blocked'],
        [JSON.stringify({ reason: '429' }), { 'content-type': 'application/json' }, 'rate_limited'],
        [JSON.stringify({ kind: 'no idea what this is' }), { 'content-type': 'application/json' }, 'other'],
        [JSON.stringify({ kind: null, reason: null }), { 'content-type': 'application/json' }, 'other'],
      ];
      for (const [body, headers, kind] of cases) {
        const r = await h.request('/api/sessions/alice/failure', { method: 'POST', bearer: h.storeProxyToken, headers, ...(body === undefined ? {} : { rawBody: String(body) }) });
        expect(r.status, `${String(body)}: ${r.text}`).to.equal(200);
        expect(r.json()).to.deep.include({ session: 'alice', instance: 0, kind, scored: true, moved: false });
      }
      // The report names its credential to the supervisor (CLIENT_REPORT_BUDGET counts per credential).
      const storeTokenId = h.store.listTokens().find((t) => t.source === 'store' && t.scope === 'proxy')!.id;
      expect(h.fake.callsOf('sessions.failure').at(-1)?.reporter).to.deep.equal({ kind: 'token', id: storeTokenId });
      await post('/api/sessions/alice/failure', { kind: 'captcha' });
      expect(h.fake.callsOf('sessions.failure').at(-1)?.reporter).to.deep.equal({ kind: 'sign-in', user: 'operator' });
    });

    it('failure: 400 for wrong JSON types, malformed and oversized bodies; 404 for an unknown session', async () => {
      for (const body of [{ kind: 5 }, { reason: ['x'] }, { kind: {} }, [1], 'captcha', 7, true]) {
        expectPlainError(await post('/api/sessions/alice/failure', body, h.storeProxyToken), 400, `failure ${JSON.stringify(body)}`);
      }
      await withoutIpc('sessions.failure', async () => {
        expectPlainError(await postRaw('/api/sessions/alice/failure', '{"kind": '), 400, 'malformed failure JSON');
        expectPlainError(await postRaw('/api/sessions/alice/failure', JSON.stringify({ reason: 'x'.repeat(MAX_JSON_BODY_BYTES) })), 400, 'oversized failure body');
      });
      expectPlainError(await post('/api/sessions/carol/failure', { kind: 'captcha' }), 404, 'failure on an unknown session');
    });

    it('DELETE /api/sessions/{key} answers 204 with an empty body, then 404', async () => {
      const r = await h.request('/api/sessions/bob', { method: 'DELETE', bearer: h.storeProxyToken });
      expect(r.status).to.equal(204);
      expect(r.text).to.equal('');
      expect(r.headers.get('content-type')).to.equal(null);
      expect(h.fake.callsOf('sessions.delete').at(-1)).to.deep.equal({ key: 'bob' });
      expectPlainError(await h.request('/api/sessions/bob', { method: 'DELETE', bearer: h.storeProxyToken }), 404, 'delete twice');
      expectPlainError(await h.request(`/api/sessions/${'k'.repeat(300)}`, { method: 'DELETE', bearer: h.storeProxyToken }), 400, 'delete an over-long key');
    });
  });

  describe('GET /api/events', () => {
    it(`answers the newest ${EVENTS_DEFAULT_LIMIT} by default and honours limit from 1 to ${EVENTS_MAX_LIMIT}`, async () => {
      const r = await get('/api/events');
      expect(r.status).to.equal(200);
      expect((r.json() as { id: number }[]).map((e) => e.id)).to.deep.equal([5, 4, 3, 2, 1]);
      expect(h.fake.callsOf('events.recent').at(-1)).to.deep.equal({ limit: EVENTS_DEFAULT_LIMIT });
      expect((await get('/api/events?limit=2')).json()).to.have.length(2);
      for (const limit of [1, EVENTS_MAX_LIMIT]) {
        expect((await get(`/api/events?limit=${limit}`)).status).to.equal(200);
        expect(h.fake.callsOf('events.recent').at(-1)).to.deep.equal({ limit });
      }
    });

    it('lists only the audit types asked for; an unknown type is a 400', async () => {
      const r = await get('/api/events?type=auth,quarantine&limit=5');
      expect(r.status).to.equal(200);
      expect(h.fake.callsOf('events.recent').at(-1)).to.deep.equal({ limit: 5, types: ['auth', 'quarantine'] });
      expect((r.json() as { type: string }[]).every((e) => e.type === 'auth' || e.type === 'quarantine')).to.equal(true);
      await withoutIpc('events.recent', async () => {
        for (const q of ['', 'nope', 'auth,', 'AUTH', 'auth&type=rotate', 'x'.repeat(300)]) expectPlainError(await get(`/api/events?type=${q}`), 400, `type=${q}`);
      });
    });

    it('refuses a bad limit with 400', async () => {
      await withoutIpc('events.recent', async () => {
        for (const q of ['0', String(EVENTS_MAX_LIMIT + 1), '-1', '1.5', 'abc', '', '1e2', '10&limit=20', '9999999999']) {
          expectPlainError(await get(`/api/events?limit=${q}`), 400, `limit=${q}`);
        }
      });
    });
  });

  describe('GET /api/stats/history', () => {
    it('answers the fine series by default and the long one for range=long', async () => {
      const fine = await get('/api/stats/history');
      expect(fine.status).to.equal(200);
      expect(fine.json()).to.deep.equal(h.fake.data.stats.fine);
      expect(h.fake.callsOf('stats.history').at(-1)).to.deep.equal({ range: 'fine' });
      expect((await get('/api/stats/history?range=fine')).json()).to.deep.equal(h.fake.data.stats.fine);
      const long = await get('/api/stats/history?range=long');
      expect(long.json()).to.deep.equal(h.fake.data.stats.long);
      expect(h.fake.callsOf('stats.history').at(-1)).to.deep.equal({ range: 'long' });
    });

    it('refuses another range with 400', async () => {
      await withoutIpc('stats.history', async () => {
        for (const q of ['x', 'LONG', '', 'long&range=fine']) expectPlainError(await get(`/api/stats/history?range=${q}`), 400, `range=${q}`);
      });
    });
  });

  // Last: mocha runs nested suites in order, after this suite's own tests.
  describe('docs/openapi.yaml', () => {
    it('documents every response above (status, media type, schema)', () => {
      expect(h.observed.length).to.be.greaterThan(150);
      expect(undocumentedResponses(h)).to.deep.equal([]);
    });
  });
});
