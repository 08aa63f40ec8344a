import { expect } from 'chai';
import fc from 'fast-check';
import {
  DEVICE_COOKIE_NAME,
  DEVICE_COOKIE_TTL_SECONDS,
  DeviceCookies,
  deviceCookieFrom,
  deviceSetCookie,
} from '../../workers/api/auth/device-cookie.js';
import { signInBucket } from '../../shared/auth/sign-in-limit.js';
import { fuzzRuns } from '../support/fixtures/fuzz-runs.js';

const KEY = Buffer.alloc(32, 3);

describe('sign-in device cookies and buckets', () => {
  it('verifies its own cookie for the same user only, within its lifetime', () => {
    const clock = { now: 1_700_000_000_000 };
    const cookies = new DeviceCookies(KEY, () => clock.now);
    const value = cookies.issue('admin');
    const id = cookies.verify(value, 'admin');
    expect(id).to.match(/^[A-Za-z0-9_-]{22}$/);
    expect(cookies.verify(value, 'Admin')).to.equal(null);
    expect(new DeviceCookies(Buffer.alloc(32, 4), () => clock.now).verify(value, 'admin'), 'another key').to.equal(null);
    expect(cookies.issue('admin')).to.not.equal(value);
    clock.now += DEVICE_COOKIE_TTL_SECONDS * 1000;
    expect(cookies.verify(value, 'admin')).to.equal(id);
    clock.now += 1000;
    expect(cookies.verify(value, 'admin'), 'expired').to.equal(null);
  });

  it('property: a changed or arbitrary value never verifies, and nothing throws', () => {
    const cookies = new DeviceCookies(KEY);
    const value = cookies.issue('admin');
    fc.assert(
      fc.property(fc.nat({ max: value.length - 1 }), fc.constantFrom(...'ABCabc012_-.'.split('')), (at, ch) => {
        const changed = value.slice(0, at) + ch + value.slice(at + 1);
        fc.pre(changed !== value);
        expect(cookies.verify(changed, 'admin')).to.equal(null);
      }),
      { numRuns: fuzzRuns(200) },
    );
    fc.assert(fc.property(fc.string({ maxLength: 200 }), (s) => {
      expect(cookies.verify(s, 'admin')).to.equal(null);
      deviceCookieFrom(s);
    }), { numRuns: fuzzRuns(200) });
  });

  it('reads the cookie out of a Cookie header and writes a script-proof, login-only Set-Cookie', () => {
    expect(deviceCookieFrom(`a=1; ${DEVICE_COOKIE_NAME}=abc.1.x; b=2`)).to.equal('abc.1.x');
    expect(deviceCookieFrom('a=1')).to.equal(null);
    expect(deviceCookieFrom(undefined)).to.equal(null);
    expect(deviceCookieFrom(['x'])).to.equal(null);
    const header = deviceSetCookie('v');
    for (const part of ['HttpOnly', 'SameSite=Strict', 'Path=/api/auth/login', `Max-Age=${DEVICE_COOKIE_TTL_SECONDS}`]) expect(header).to.contain(part);
  });

  it('buckets by device when there is one, else by address (IPv6 /64) and user, bounded in length', () => {
    expect(signInBucket('192.0.2.1', 'admin', null)).to.equal(signInBucket('::ffff:192.0.2.1', 'admin', null));
    expect(signInBucket('192.0.2.1', 'admin', null)).to.not.equal(signInBucket('192.0.2.1', 'root', null));
    expect(signInBucket('2001:db8::1', 'admin', null)).to.equal(signInBucket('2001:db8::2', 'admin', null));
    expect(signInBucket('192.0.2.1', 'admin', 'dev1')).to.equal(signInBucket('203.0.113.9', 'admin', 'dev1'));
    expect(signInBucket('ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'u'.repeat(128), null).length).to.be.below(64);
  });
});
