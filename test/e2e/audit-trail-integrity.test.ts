/**
 * Issue 14, findings 2 and 3 on the real service: a proxy token cannot flush the audit trail,
 * and the live stream ends when the credential behind it does.
 */
import { expect } from 'chai';
import type { AuditEvent } from '../../shared/api/audit-event.js';
import { AUDIT_CAPACITY } from '../../supervisor/audit/audit-log.js';
import { SignInCredentials } from '../../workers/api/auth/sign-in-credentials.js';
import { AuthStore } from '../../supervisor/auth/auth-store.js';
import { curlSocks } from '../support/clients/curl.js';
import { quietLogger } from '../support/fakes/quiet-logger.js';
import { StreamClient } from '../support/clients/sse-stream.js';
import { TEST_ADMIN_PASSWORD, TEST_PROXY_TOKEN, withService } from '../support/fixtures/service.js';

describe('audit trail: a proxy token cannot flush it', function () {
  this.timeout(240_000);
  let admin: string;

  // EXIT_HISTORY 0: back-to-back rotations then never wait for an idle instance to be given a
  // fresh exit (a pool of 2 cannot stay clear of a longer history at this pace); what this
  // suite proves is the audit trail, not exit freshness (test/e2e/exits.test.ts).
  const suite = withService({ POOL_SIZE: '2', LOGIN_RATE_LIMIT: '3/5m', EXIT_HISTORY: '0' }, { ready: 2, readyTimeoutMs: 120_000 });
  before(async () => {
    admin = await suite.svc.login();
  });

  it(`keeps every auth event after ${AUDIT_CAPACITY} session rotates with a proxy token`, async () => {
    const created = await suite.svc.api('/api/tokens', { method: 'POST', bearer: admin, body: { name: 'audited', scope: 'proxy' } });
    expect(created.status).to.equal(201);
    const r = await curlSocks(suite.svc.socksPort, 'churn', TEST_PROXY_TOKEN, suite.svc.whoamiUrl);
    expect(r.code, r.stderr).to.equal(0);
    const events = async (query = ''): Promise<AuditEvent[]> => (await (await suite.svc.api(`/api/events?limit=${AUDIT_CAPACITY}${query}`, { bearer: admin })).json()) as AuditEvent[];
    const authBefore = (await events()).filter((e) => e.type === 'auth');
    expect(authBefore.map((e) => e.message).join(' | ')).to.match(/signed in/).and.to.match(/token .*issued/i);

    for (let i = 0; i < AUDIT_CAPACITY; i++) {
      const rotated = await suite.svc.api('/api/sessions/churn/rotate', { method: 'POST', bearer: TEST_PROXY_TOKEN });
      expect(rotated.status).to.equal(200);
    }
    const after = await events();
    expect(after.filter((e) => e.type === 'rotate').length, 'the rotates are there too').to.be.greaterThan(AUDIT_CAPACITY / 2);
    // The newest AUDIT_CAPACITY are all the churn; the auth events are still kept, and listed by type.
    const auth = await events('&type=auth,quarantine');
    expect(auth.map((e) => e.id)).to.include.members(authBefore.map((e) => e.id));
    expect(auth.every((e) => e.type === 'auth' || e.type === 'quarantine')).to.equal(true);
    // Newest first across both classes.
    const ids = after.map((e) => e.id);
    expect(ids).to.deep.equal([...ids].sort((a, b) => b - a));
  });

  it('writes sign-ins, failed sign-ins and rate-limited sign-ins to the log, without the password', async () => {
    const wrong = 'not-the-password-9f3c';
    for (let i = 0; i < 3; i++) {
      const r = await suite.svc.api('/api/auth/login', { method: 'POST', body: { user: 'admin', password: wrong } });
      expect(r.status).to.equal(401);
    }
    const limited = await suite.svc.api('/api/auth/login', { method: 'POST', body: { user: 'admin', password: wrong } });
    expect(limited.status).to.equal(429);
    const out = suite.svc.output();
    expect(out).to.match(/signed in .*user="admin".*address="127\.0\.0\.1"/);
    expect(out).to.match(/sign-in refused: wrong user or password .*address="127\.0\.0\.1"/);
    expect(out).to.match(/sign-in refused: too many failed attempts .*retryAfterSeconds=/);
    expect(out).to.not.contain(wrong);
  });
});

describe('live stream: it ends when its credential does', function () {
  this.timeout(240_000);
  let admin: string;
  let base: string;

  const suite = withService({ POOL_SIZE: '1' }, { ready: 1, readyTimeoutMs: 120_000 });
  before(async () => {
    admin = await suite.svc.login();
    base = `http://127.0.0.1:${suite.svc.apiPort}`;
  });

  it('ends a stream opened with a token with a signed-out event when the token is revoked', async () => {
    const created = (await (await suite.svc.api('/api/tokens', { method: 'POST', bearer: admin, body: { name: 'watcher', scope: 'admin' } })).json()) as { id: string; secret: string };
    const stream = await StreamClient.open(base, '/api/stream', { authorization: `Bearer ${created.secret}` });
    try {
      expect(stream.status).to.equal(200);
      await stream.waitFor(() => stream.of('state').length > 0, 'the first state');
      const revoked = await suite.svc.api(`/api/tokens/${created.id}`, { method: 'DELETE', bearer: admin });
      expect(revoked.status).to.equal(204);
      // A token never expires on its own: the stream ends because of the revocation.
      await stream.waitFor(() => stream.ended, 'the stream to end', 10_000);
      expect(stream.of('signed-out')).to.deep.equal([{ reason: 'revoked' }]);
    } finally {
      stream.close();
    }
  });

  it("ends a ticket's stream when the sign-in behind the ticket expires", async () => {
    // A sign-in credential with a few seconds left, signed with the service's own key (read
    // from DATA_DIR the way the service reads it): LOGIN_TTL cannot be set that short.
    const SIGN_IN_LEFT_MS = 4000;
    const { store } = await AuthStore.open({
      config: { adminUser: 'admin', adminPassword: TEST_ADMIN_PASSWORD, proxyToken: null, authDisabled: false, dataDir: suite.svc.dataDir },
      log: quietLogger(),
      bcryptCost: 4,
    });
    const shortSignIn = new SignInCredentials(store.snapshots().api.signingKey, 'admin', SIGN_IN_LEFT_MS).issueSession();
    const ticket = (await (await suite.svc.api('/api/auth/ticket', { method: 'POST', bearer: shortSignIn.token })).json()) as { ticket: string; expires_in: number };
    expect(ticket.expires_in).to.be.at.most(Math.ceil(SIGN_IN_LEFT_MS / 1000));
    const stream = await StreamClient.open(base, `/api/stream?ticket=${encodeURIComponent(ticket.ticket)}`);
    try {
      expect(stream.status).to.equal(200);
      await stream.waitFor(() => stream.ended, 'the stream to end at the sign-in expiry', SIGN_IN_LEFT_MS + 15_000);
      const expiredAt = shortSignIn.expires * 1000;
      // `expires` is in whole seconds: not before the expiry, within that rounding.
      expect(Date.now() - expiredAt, 'not before the expiry').to.be.at.least(-1000);
      expect(stream.of('signed-out')).to.deep.equal([{ reason: 'expired' }]);
    } finally {
      stream.close();
    }
  });
});
