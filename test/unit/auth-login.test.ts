import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { hashAdminPassword, verifyAdminPassword } from '../../shared/auth/admin-password.js';
import { ApiAuthenticator, wwwAuthenticate } from '../../workers/api/auth/api-authenticator.js';
import type { ApiCredentialSnapshot } from '../../shared/auth/credential-snapshot.js';
import { TicketNotAllowedError } from '../../shared/auth/errors.js';
import { LoginChecker } from '../../workers/api/auth/login-checker.js';
import { LoginRateLimiter, MAX_TRACKED_LOGIN_ADDRESSES } from '../../shared/auth/login-rate-limiter.js';
import { rateLimitKey } from '../../shared/auth/rate-limit-key.js';
import { TICKET_TTL_MS } from '../../workers/api/auth/sign-in-credentials.js';
import { digestTokenSecret } from '../../shared/auth/token-format.js';

const PASSWORD = 'Zq3xV9mT2pL8rK4wN7yB';
const PROXY_SECRET = 'tp_AAAAAAAAAAAAAAAAAAAAAA';
const ADMIN_SECRET = 'tp_BBBBBBBBBBBBBBBBBBBBBB';

async function apiSnapshot(overrides: Partial<ApiCredentialSnapshot> = {}, cost = 4): Promise<ApiCredentialSnapshot> {
  return {
    version: 1,
    authDisabled: false,
    tokens: [
      { id: 'proxy1', scope: 'proxy', digest: digestTokenSecret(PROXY_SECRET) },
      { id: 'admin1', scope: 'admin', digest: digestTokenSecret(ADMIN_SECRET) },
    ],
    adminUser: 'admin',
    passwordHash: await hashAdminPassword(PASSWORD, cost),
    signingKey: randomBytes(32).toString('base64'),
    ...overrides,
  };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

describe('sign-in', () => {
  describe('admin password hashing', () => {
    it('uses every character of long passwords (no 72-byte bcrypt truncation)', async () => {
      const long = 'p'.repeat(100);
      const hash = await hashAdminPassword(long, 4);
      expect(await verifyAdminPassword(long, hash)).to.equal(true);
      expect(await verifyAdminPassword('p'.repeat(99) + 'q', hash)).to.equal(false);
      expect(await verifyAdminPassword('p'.repeat(72), hash)).to.equal(false);
    });
  });

  describe('login checker', () => {
    it('accepts the admin user with the password and nothing else', async () => {
      const checker = new LoginChecker(await apiSnapshot());
      expect(await checker.check('admin', PASSWORD)).to.equal(true);
      expect(await checker.check('admin', PASSWORD + 'x')).to.equal(false);
      expect(await checker.check('Admin', PASSWORD)).to.equal(false);
      expect(await checker.check('admin2', PASSWORD)).to.equal(false);
      expect(await checker.check('', '')).to.equal(false);
    });

    it('spends the same bcrypt work on a wrong user as on a wrong password', async () => {
      // A cost high enough that bcrypt dominates the measurement; without the always-run
      // comparison a wrong user would answer in microseconds.
      const checker = new LoginChecker(await apiSnapshot({}, 8));
      const time = async (user: string, password: string): Promise<number> => {
        const started = performance.now();
        expect(await checker.check(user, password)).to.equal(false);
        return performance.now() - started;
      };
      await time('nobody', 'warm-up');
      const wrongUser: number[] = [];
      const wrongPassword: number[] = [];
      for (let i = 0; i < 5; i++) {
        wrongUser.push(await time('nobody', PASSWORD));
        wrongPassword.push(await time('admin', 'wrong'));
      }
      const ratio = median(wrongUser) / median(wrongPassword);
      expect(ratio).to.be.within(0.5, 2);
      expect(median(wrongUser)).to.be.above(1);
    });
  });

  describe('rate limiter', () => {
    const limit = { attempts: 3, windowMs: 60_000 };

    it('allows `attempts` per window, then refuses with Retry-After until the window ends', () => {
      const limiter = new LoginRateLimiter(limit);
      for (let i = 0; i < 3; i++) expect(limiter.attempt('192.0.2.1', 1000 + i)).to.deep.equal({ allowed: true });
      expect(limiter.attempt('192.0.2.1', 1000)).to.deep.equal({ allowed: false, retryAfterSeconds: 60 });
      expect(limiter.attempt('192.0.2.1', 30_500)).to.deep.equal({ allowed: false, retryAfterSeconds: 31 });
      expect(limiter.attempt('192.0.2.1', 60_999)).to.deep.equal({ allowed: false, retryAfterSeconds: 1 });
      // Other addresses are unaffected.
      expect(limiter.attempt('192.0.2.2', 2000)).to.deep.equal({ allowed: true });
      // A new window starts once the old one is over.
      expect(limiter.attempt('192.0.2.1', 61_000)).to.deep.equal({ allowed: true });
    });

    it('forgets an address after a successful sign-in', () => {
      const limiter = new LoginRateLimiter(limit);
      for (let i = 0; i < 3; i++) limiter.attempt('192.0.2.1', 0);
      limiter.succeeded('192.0.2.1');
      expect(limiter.attempt('192.0.2.1', 0)).to.deep.equal({ allowed: true });
    });

    it('counts IPv4-mapped addresses as IPv4 and IPv6 per /64', () => {
      expect(rateLimitKey('::ffff:192.0.2.7')).to.equal('192.0.2.7');
      expect(rateLimitKey('192.0.2.7')).to.equal('192.0.2.7');
      expect(rateLimitKey('2001:db8:1:2:aaaa::1')).to.equal('2001:db8:1:2::/64');
      expect(rateLimitKey('2001:db8:1:2:ffff:ffff:ffff:ffff')).to.equal('2001:db8:1:2::/64');
      expect(rateLimitKey('2001:db8::1')).to.equal('2001:db8:0:0::/64');
      expect(rateLimitKey('fe80::1%eth0')).to.equal('fe80:0:0:0::/64');
      expect(rateLimitKey('::1')).to.equal('0:0:0:0::/64');
      expect(rateLimitKey('64:ff9b::192.0.2.1')).to.equal('64:ff9b:0:0::/64');
      const limiter = new LoginRateLimiter(limit);
      for (let i = 0; i < 3; i++) limiter.attempt(`2001:db8:1:2::${i + 1}`, 0);
      expect(limiter.attempt('2001:db8:1:2::99', 0).allowed).to.equal(false);
      expect(limiter.attempt('2001:db8:1:3::1', 0).allowed).to.equal(true);
    });

    it(`stays bounded (MAX_TRACKED_LOGIN_ADDRESSES = ${MAX_TRACKED_LOGIN_ADDRESSES}) under 100k distinct addresses, evicting the oldest`, () => {
      const limiter = new LoginRateLimiter(limit);
      for (let i = 0; i < 3; i++) limiter.attempt('198.51.100.1', 0);
      expect(limiter.attempt('198.51.100.1', 0).allowed).to.equal(false);
      for (let i = 0; i < 100_000; i++) {
        limiter.attempt(`10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`, 1);
        if (limiter.trackedAddresses > MAX_TRACKED_LOGIN_ADDRESSES) expect.fail(`tracking ${limiter.trackedAddresses} addresses`);
      }
      expect(limiter.trackedAddresses).to.equal(MAX_TRACKED_LOGIN_ADDRESSES);
      // The oldest window was evicted first.
      expect(limiter.attempt('198.51.100.1', 2).allowed).to.equal(true);
    });

    it('keeps counting correctly through heavy sign-in/sign-out churn', () => {
      const limiter = new LoginRateLimiter(limit);
      for (let i = 0; i < 50_000; i++) {
        limiter.attempt(`10.1.${(i >> 8) & 255}.${i & 255}`, 0);
        limiter.succeeded(`10.1.${(i >> 8) & 255}.${i & 255}`);
      }
      expect(limiter.trackedAddresses).to.equal(0);
      for (let i = 0; i < 3; i++) expect(limiter.attempt('192.0.2.1', 0).allowed).to.equal(true);
      expect(limiter.attempt('192.0.2.1', 0).allowed).to.equal(false);
    });

    it('drops expired windows by itself', () => {
      const limiter = new LoginRateLimiter(limit);
      for (let i = 0; i < 500; i++) limiter.attempt(`10.0.${i >> 8}.${i & 255}`, 0);
      expect(limiter.trackedAddresses).to.equal(500);
      limiter.attempt('10.9.9.9', 60_000);
      expect(limiter.trackedAddresses).to.equal(1);
    });
  });

  describe('API authenticator', () => {
    const settings = { loginTtlMs: 3_600_000, loginRateLimit: { attempts: 3, windowMs: 60_000 } };

    it('signs in with the right credentials and the session credential then authenticates', async () => {
      const auth = new ApiAuthenticator(await apiSnapshot(), settings);
      const outcome = await auth.signIn({ user: 'admin', password: PASSWORD }, '192.0.2.1');
      if (outcome.kind !== 'signed-in') expect.fail(`signed in expected, got ${outcome.kind}`);
      expect(outcome.result.user).to.equal('admin');
      expect(auth.authenticate({ authorization: `Bearer ${outcome.result.token}` })).to.deep.equal({
        ok: true,
        principal: { kind: 'session', user: 'admin', expires: outcome.result.expires },
      });
    });

    it('answers a wrong user and a wrong password identically, then rate-limits that address and user', async () => {
      const auth = new ApiAuthenticator(await apiSnapshot(), settings);
      expect(await auth.signIn({ user: 'nobody', password: PASSWORD }, '192.0.2.9')).to.deep.equal({ kind: 'refused' });
      for (let i = 0; i < 3; i++) expect(await auth.signIn({ user: 'admin', password: 'wrong' }, '192.0.2.9')).to.deep.equal({ kind: 'refused' });
      const limited = await auth.signIn({ user: 'admin', password: PASSWORD }, '192.0.2.9');
      expect(limited.kind).to.equal('rate-limited');
      expect(limited).to.have.property('retryAfterSeconds').within(1, 60);
      // Another address, or guesses at another user name, are counted apart.
      expect((await auth.signIn({ user: 'admin', password: PASSWORD }, '192.0.2.10')).kind).to.equal('signed-in');
      expect((await auth.signIn({ user: 'nobody', password: 'wrong' }, '192.0.2.9')).kind).to.equal('refused');
    });

    it('a browser with a device cookie from an earlier sign-in gets through a lockout of its address', async () => {
      const auth = new ApiAuthenticator(await apiSnapshot(), settings);
      const first = await auth.signIn({ user: 'admin', password: PASSWORD }, '192.0.2.20');
      if (first.kind !== 'signed-in' || first.deviceCookie === null) throw new Error('expected a device cookie');
      // Someone else at the same address locks out admin...
      for (let i = 0; i < 5; i++) await auth.signIn({ user: 'admin', password: 'guess' }, '192.0.2.20');
      expect((await auth.signIn({ user: 'admin', password: PASSWORD }, '192.0.2.20')).kind).to.equal('rate-limited');
      // ...a forged or foreign cookie does not help them...
      // (A different last character, whatever it was: replacing it with a fixed one left the cookie intact 1 time in 16.)
      const forged = `${first.deviceCookie.slice(0, -1)}${first.deviceCookie.endsWith('A') ? 'B' : 'A'}`;
      expect((await auth.signIn({ user: 'admin', password: PASSWORD }, '192.0.2.20', forged)).kind).to.equal('rate-limited');
      // ...the operator's browser signs in.
      const again = await auth.signIn({ user: 'admin', password: PASSWORD }, '192.0.2.20', first.deviceCookie);
      expect(again.kind).to.equal('signed-in');
      // A stolen cookie is no master key: its own bucket locks after the same number of failures.
      for (let i = 0; i < 3; i++) expect((await auth.signIn({ user: 'admin', password: 'guess' }, '198.51.100.1', first.deviceCookie)).kind).to.equal('refused');
      expect((await auth.signIn({ user: 'admin', password: PASSWORD }, '198.51.100.1', first.deviceCookie)).kind).to.equal('rate-limited');
    });

    it('counts parallel attempts before their bcrypt finishes', async () => {
      const auth = new ApiAuthenticator(await apiSnapshot(), settings);
      const outcomes = await Promise.all(Array.from({ length: 10 }, () => auth.signIn({ user: 'admin', password: 'x' }, '192.0.2.5')));
      expect(outcomes.filter((o) => o.kind === 'refused')).to.have.length(3);
      expect(outcomes.filter((o) => o.kind === 'rate-limited')).to.have.length(7);
    });

    it('answers a bad body with bad-request, not counted', async () => {
      const auth = new ApiAuthenticator(await apiSnapshot(), settings);
      for (let i = 0; i < 5; i++) expect((await auth.signIn({ user: 1 }, '192.0.2.1')).kind).to.equal('bad-request');
      expect((await auth.signIn({ user: 'admin', password: PASSWORD }, '192.0.2.1')).kind).to.equal('signed-in');
    });

    it('under AUTH_DISABLED signs in whatever is posted, never rate-limited, and admits every request', async () => {
      const auth = new ApiAuthenticator(await apiSnapshot({ authDisabled: true }), settings);
      for (let i = 0; i < 20; i++) expect((await auth.signIn('garbage', '192.0.2.1')).kind).to.equal('signed-in');
      expect(auth.authenticate({ authorization: undefined })).to.deep.equal({ ok: true, principal: { kind: 'anonymous-auth-disabled' } });
      expect(auth.mintTicket({ kind: 'anonymous-auth-disabled' }).expires_in).to.equal(60);
    });

    it('authenticates tokens by scope and refuses missing, malformed and unknown credentials', async () => {
      const auth = new ApiAuthenticator(await apiSnapshot(), settings);
      expect(auth.authenticate({ authorization: `Bearer ${PROXY_SECRET}` })).to.deep.equal({
        ok: true,
        principal: { kind: 'token', id: 'proxy1', scope: 'proxy' },
      });
      expect(auth.authenticate({ authorization: `bearer ${ADMIN_SECRET}` })).to.deep.equal({
        ok: true,
        principal: { kind: 'token', id: 'admin1', scope: 'admin' },
      });
      expect(auth.authenticate({ authorization: undefined })).to.deep.equal({ ok: false, reason: 'missing' });
      expect(auth.authenticate({ authorization: 'Bearer' })).to.deep.equal({ ok: false, reason: 'malformed' });
      expect(auth.authenticate({ authorization: `Basic ${Buffer.from('admin:' + PASSWORD).toString('base64')}` })).to.deep.equal({
        ok: false,
        reason: 'malformed',
      });
      expect(auth.authenticate({ authorization: 'Bearer tp_unknown' })).to.deep.equal({ ok: false, reason: 'invalid' });
      expect(auth.authenticate({ authorization: 'Bearer nonsense' })).to.deep.equal({ ok: false, reason: 'malformed' });
      expect(wwwAuthenticate('missing')).to.equal('Bearer realm="exitpool"');
      expect(wwwAuthenticate('expired')).to.include('error="invalid_token"');
    });

    it('confines tickets to the stream: not a session credential, only via the stream, cannot mint a ticket', async () => {
      let now = Date.UTC(2026, 0, 1);
      const auth = new ApiAuthenticator(await apiSnapshot(), settings, { now: () => now });
      const signedIn = await auth.signIn({ user: 'admin', password: PASSWORD }, '192.0.2.1');
      if (signedIn.kind !== 'signed-in') expect.fail('sign-in failed');
      const session = auth.authenticate({ authorization: `Bearer ${signedIn.result.token}` });
      if (!session.ok) expect.fail('session credential refused');
      const { ticket } = auth.mintTicket(session.principal);

      // On the stream, as the query parameter: admitted as a ticket principal with no scope.
      const onStream = auth.authenticate({ authorization: undefined, ticket, allowTicket: true });
      // It carries the expiry of the sign-in behind it: the stream it opens ends then.
      expect(onStream).to.deep.equal({ ok: true, principal: { kind: 'ticket', user: 'admin', sessionExpires: signedIn.result.expires } });
      // Anywhere else the query parameter is not looked at.
      expect(auth.authenticate({ authorization: undefined, ticket })).to.deep.equal({ ok: false, reason: 'missing' });
      // As a bearer credential it is not a session credential (so it cannot reach the ticket route).
      expect(auth.authenticate({ authorization: `Bearer ${ticket}` })).to.deep.equal({ ok: false, reason: 'invalid' });
      expect(auth.authenticate({ authorization: `Bearer ${ticket}`, allowTicket: true })).to.deep.equal({ ok: false, reason: 'invalid' });
      // Even holding a ticket principal, minting is refused (403); so is a token.
      expect(() => auth.mintTicket({ kind: 'ticket', user: 'admin' })).to.throw(TicketNotAllowedError).with.property('code', 'EXITPOOL_FORBIDDEN');
      expect(() => auth.mintTicket({ kind: 'token', id: 'admin1', scope: 'admin' })).to.throw(TicketNotAllowedError);
      // A session credential is no ticket either, and the header still works on the stream.
      expect(auth.authenticate({ authorization: undefined, ticket: signedIn.result.token, allowTicket: true })).to.deep.equal({
        ok: false,
        reason: 'invalid',
      });
      expect(auth.authenticate({ authorization: `Bearer ${signedIn.result.token}`, allowTicket: true }).ok).to.equal(true);
      expect(auth.authenticate({ authorization: undefined, ticket: ['a', 'b'], allowTicket: true })).to.deep.equal({ ok: false, reason: 'malformed' });

      now += TICKET_TTL_MS;
      expect(auth.authenticate({ authorization: undefined, ticket, allowTicket: true })).to.deep.equal({ ok: false, reason: 'expired' });
    });

    it('takes newer snapshots (revocation reaches the API worker) and ignores older ones', async () => {
      const first = await apiSnapshot();
      const auth = new ApiAuthenticator(first, settings);
      const revoked = { ...first, version: 2, tokens: first.tokens.filter((t) => t.id !== 'proxy1') };
      expect(auth.update(revoked)).to.equal(true);
      expect(auth.authenticate({ authorization: `Bearer ${PROXY_SECRET}` })).to.deep.equal({ ok: false, reason: 'invalid' });
      expect(auth.update(first)).to.equal(false);
      expect(auth.version).to.equal(2);
      expect(auth.authenticate({ authorization: `Bearer ${PROXY_SECRET}` }).ok).to.equal(false);
    });
  });
});
