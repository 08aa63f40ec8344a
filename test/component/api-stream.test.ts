import { expect } from 'chai';
import net from 'node:net';
import type { AuditEvent } from '../../shared/api/audit-event.js';
import { TICKET_TTL_MS } from '../../workers/api/auth/sign-in-credentials.js';
import { schemaViolations } from '../support/parsers/openapi-schema.js';
import { loadOpenApiDocument } from '../support/parsers/openapi-document.js';
import { StreamClient } from '../support/clients/sse-stream.js';
import { LOGIN_TTL_MS, startApiHarness, type ApiHarness } from '../support/fixtures/api-harness.js';
import { waitFor } from '../support/waiting.js';

/**
 * GET /api/stream on the real app (docs/api.md, "Live stream"): who may open it, the framing (retry,
 * `state` and `event` frames with one line of JSON each), the initial state, freeing a
 * subscriber on disconnect, and a stalled subscriber that loses frames and is dropped without
 * holding anyone else back.
 */

function auditEvent(id: number, message = `event ${id}`): AuditEvent {
  return { id, time: new Date().toISOString(), type: 'rotate', instance: 0, session: null, message, details: { by: 'api' } };
}

describe('API live stream (GET /api/stream)', function () {
  let h: ApiHarness;
  const open: StreamClient[] = [];
  const connect = async (path: string, headers: Record<string, string> = {}): Promise<StreamClient> => {
    const c = await StreamClient.open(h.base, path, headers);
    open.push(c);
    return c;
  };

  before(async () => {
    h = await startApiHarness({ hub: { stallLimitMs: 300 } });
  });
  afterEach(() => {
    for (const c of open.splice(0)) c.close();
  });
  after(async () => h.close());

  it('opens with a ticket in the query: text/event-stream, retry 2000, then the latest state', async () => {
    h.fake.pushState();
    // The notice lands during the sign-in round trips that mint the ticket.
    const ticket = await h.ticket();
    const c = await connect(`/api/stream?ticket=${ticket}`);
    expect(c.status).to.equal(200);
    expect(c.headers['content-type']).to.match(/^text\/event-stream/);
    expect(c.headers['cache-control']).to.contain('no-cache');
    await c.waitFor(() => c.of('state').length === 1, 'the initial state');
    expect(c.retry).to.equal(2000);
    expect(c.of('state')[0]).to.deep.equal(h.fake.snapshot());
  });

  it('ends a token\'s stream with a signed-out event when the token is revoked, before the revocation answers', async () => {
    const created = await h.request('/api/tokens', { method: 'POST', bearer: h.adminToken, body: { name: 'stream reader', scope: 'admin' } });
    const token = created.json() as { id: string; secret: string };
    const c = await connect('/api/stream', { authorization: `Bearer ${token.secret}` });
    const other = await connect('/api/stream', { authorization: `Bearer ${h.adminToken}` });
    await waitFor('two subscribers', () => h.hub.size >= 2);
    const revoked = await h.request(`/api/tokens/${token.id}`, { method: 'DELETE', bearer: h.adminToken });
    expect(revoked.status).to.equal(204);
    // The last event was written before the worker acknowledged the new snapshot.
    expect(c.of('signed-out')).to.deep.equal([{ reason: 'revoked' }]);
    await c.waitFor(() => c.ended, 'the stream to end');
    expect(other.ended, "another credential's stream goes on").to.equal(false);
    expect(other.of('signed-out')).to.deep.equal([]);
  });

  it('ends a ticket\'s stream when the sign-in behind the ticket expires', async () => {
    const realNow = Date.now();
    // A sign-in that has about two seconds left (the harness's auth clock is separate from the
    // timers). Its expiry is written in whole seconds, so up to one of them is lost to rounding.
    h.clock.now = realNow - LOGIN_TTL_MS + 2500;
    const ticket = await h.ticket();
    const c = await connect(`/api/stream?ticket=${ticket}`);
    h.clock.now = realNow;
    expect(c.status).to.equal(200);
    await c.waitFor(() => c.ended, 'the stream to end at the sign-in expiry', 15_000);
    expect(c.of('signed-out')).to.deep.equal([{ reason: 'expired' }]);
    expect(Date.now() - realNow, 'not before the expiry').to.be.at.least(1000);
  });

  it('forwards each state snapshot and each audit event as one JSON frame, to every subscriber', async () => {
    const ticket = await h.ticket();
    const a = await connect(`/api/stream?ticket=${ticket}`);
    const b = await connect('/api/stream', { authorization: `Bearer ${h.adminToken}` });
    await waitFor('two subscribers', () => h.hub.size >= 2);
    const before = { a: a.frames.length, b: b.frames.length };
    h.fake.data.pool.sessions = 42;
    h.fake.pushState();
    h.fake.pushEvent(auditEvent(900, 'line one\nline two'));
    for (const c of [a, b]) {
      await c.waitFor(() => c.of('event').some((e) => (e as AuditEvent).id === 900), 'the event');
      const states = c.of('state') as { pool: { sessions: number } }[];
      expect(states.at(-1)?.pool.sessions).to.equal(42);
    }
    const doc = loadOpenApiDocument();
    for (const s of a.of('state')) expect(schemaViolations(doc, { $ref: '#/components/schemas/StateSnapshot' }, s)).to.deep.equal([]);
    for (const e of a.of('event')) expect(schemaViolations(doc, { $ref: '#/components/schemas/AuditEvent' }, e)).to.deep.equal([]);
    expect(a.of('event').at(-1)).to.deep.include({ id: 900, message: 'line one\nline two' });
    expect(a.frames.slice(before.a).map((f) => f.event)).to.deep.equal(['state', 'event']);
    expect(b.frames.slice(before.b).map((f) => f.event)).to.deep.equal(['state', 'event']);
  });

  it('admits a session credential or an admin token in the header; refuses a proxy token (403) and bad credentials (401)', async () => {
    for (const bearer of [await h.login(), h.adminToken]) {
      const c = await connect('/api/stream', { authorization: `Bearer ${bearer}` });
      expect(c.status).to.equal(200);
    }
    const proxy = await connect('/api/stream', { authorization: `Bearer ${h.storeProxyToken}` });
    expect(proxy.status).to.equal(403);
    expect(proxy.headers['www-authenticate']).to.equal(undefined);
    const refusals: [string, Record<string, string>][] = [
      ['/api/stream', {}],
      ['/api/stream?ticket=', {}],
      ['/api/stream?ticket=not.a.ticket', {}],
      [`/api/stream?ticket=${await h.login()}`, {}],
      ['/api/stream?ticket=a&ticket=b', {}],
      ['/api/stream', { authorization: `Bearer ${await h.ticket()}` }],
    ];
    for (const [path, headers] of refusals) {
      const c = await connect(path, headers);
      expect(c.status, path).to.equal(401);
      expect(c.headers['www-authenticate'], path).to.match(/^Bearer realm="exitpool"/);
      expect(c.headers['content-type'], path).to.match(/^text\/plain/);
    }
  });

  it(`refuses a ticket older than ${TICKET_TTL_MS / 1000} seconds`, async () => {
    const ticket = await h.ticket();
    h.clock.now += TICKET_TTL_MS + 1000;
    try {
      const c = await connect(`/api/stream?ticket=${ticket}`);
      expect(c.status).to.equal(401);
    } finally {
      h.clock.now = Date.now();
    }
  });

  it('frees a subscriber when its client disconnects', async () => {
    await waitFor('earlier subscribers gone', () => h.hub.size === 0);
    const c = await connect(`/api/stream?ticket=${await h.ticket()}`);
    await waitFor('the subscriber', () => h.hub.size === 1);
    c.close();
    await waitFor('the subscriber freed', () => h.hub.size === 0);
  });

  it('skips a stalled subscriber (drops its frames, then disconnects it) while a fast one receives every frame', async () => {
    await waitFor('earlier subscribers gone', () => h.hub.size === 0);
    const ticket = await h.ticket();
    // A client that sends its request and never reads a byte.
    const stalled = net.connect(Number(new URL(h.base).port), '127.0.0.1');
    stalled.on('error', () => undefined);
    await new Promise<void>((resolve) => stalled.once('connect', () => resolve()));
    stalled.write(`GET /api/stream?ticket=${ticket} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
    stalled.pause();
    const fast = await connect(`/api/stream?ticket=${ticket}`);
    await waitFor('both subscribers', () => h.hub.size === 2);

    // Large frames, each published once the fast client has the previous one, until the
    // stalled client's socket buffers are full and the hub starts dropping its frames.
    const padding = 'x'.repeat(64 * 1024);
    const droppedBefore = h.hub.dropped;
    let published = 0;
    while (h.hub.dropped === droppedBefore) {
      if (published >= 3000) throw new Error('the stalled subscriber never became congested');
      published += 1;
      h.fake.pushEvent(auditEvent(10_000 + published, padding));
      await fast.waitFor(() => fast.of('event').length === published, `fast frame ${published}`);
    }
    // Once congested it is skipped: the fast subscriber keeps receiving at once.
    for (let i = 0; i < 20; i++) {
      published += 1;
      h.fake.pushEvent(auditEvent(10_000 + published, 'small'));
      // The stalled subscriber never reads: had the hub waited on it, this frame would never come.
      await fast.waitFor(() => fast.of('event').length === published, `fast frame ${published}`, 10_000);
    }
    // Most of them were dropped for the stalled one (the kernel may still take a frame now and then).
    expect(h.hub.dropped - droppedBefore).to.be.at.least(10);
    // A frame published once it has been congested past the stall limit disconnects it; the
    // fast one is unaffected.
    const deadline = Date.now() + 10_000;
    while (h.hub.size > 1) {
      if (Date.now() > deadline) throw new Error('the stalled subscriber was never disconnected');
      await new Promise((r) => setTimeout(r, 350));
      published += 1;
      h.fake.pushEvent(auditEvent(10_000 + published, 'after the limit'));
      await fast.waitFor(() => fast.of('event').length === published, 'the frame after the limit');
    }
    expect((fast.of('event') as AuditEvent[]).map((e) => e.id)).to.deep.equal(Array.from({ length: published }, (_, i) => 10_001 + i));
    expect(fast.ended).to.equal(false);
    stalled.destroy();
  });
});
