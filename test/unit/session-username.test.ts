import { expect } from 'chai';
import fc from 'fast-check';
import '../support/fixtures/fuzz-runs.js';
import { MAX_SESSION_COUNTRIES, parseSessionUsername, SessionUsernameError, sessionParamsTag } from '../../shared/api/session-username.js';

describe('session parameters in the proxy username', () => {
  it('reads the parameters from the end and leaves the key as it is, dashes included', () => {
    expect(parseSessionUsername('shop-eu-1-country-de')).to.deep.equal({ key: 'shop-eu-1', params: { countries: ['de'] } });
    expect(parseSessionUsername('customer-session-abc-country-DE,nl-sesstime-10')).to.deep.equal({
      key: 'customer-session-abc',
      params: { countries: ['de', 'nl'], lifetimeMs: 600_000 },
    });
    expect(parseSessionUsername('crawler-ttl-90s-mode-rotating')).to.deep.equal({ key: 'crawler', params: { lifetimeMs: 90_000, mode: 'rotating' } });
    expect(parseSessionUsername('a-mode-sticky-country-se').params).to.deep.equal({ mode: 'sticky', countries: ['se'] });
    expect(parseSessionUsername('x-ttl-2h').params.lifetimeMs).to.equal(7_200_000);
  });

  it('keeps session-<id> in the key wherever it is written, as commercial gateways spell it', () => {
    expect(parseSessionUsername('customer-u1-session-abc-country-de')).to.deep.equal({ key: 'customer-u1-session-abc', params: { countries: ['de'] } });
    expect(parseSessionUsername('customer-u1-country-de-session-abc')).to.deep.equal({ key: 'customer-u1-session-abc', params: { countries: ['de'] } });
    expect(parseSessionUsername('user-session-7-x')).to.deep.equal({ key: 'user-session-7-x', params: {} });
  });

  it('refuses a country followed by something that is not a parameter, rather than ignore the country', () => {
    expect(() => parseSessionUsername('u-country-de-zone-residential')).to.throw(SessionUsernameError, /"zone" after country-de is not a parameter/);
    expect(parseSessionUsername('dark-mode-test-1').key, 'other names inside a key are left alone').to.equal('dark-mode-test-1');
  });

  it('refuses any recognised parameter followed by something that is not one, rather than drop the mode or lifetime', () => {
    expect(() => parseSessionUsername('k-mode-rotating-zone-x')).to.throw(SessionUsernameError, /"zone" after mode-rotating is not a parameter/);
    expect(() => parseSessionUsername('k-ttl-10m-foo')).to.throw(SessionUsernameError, /"foo" after ttl-10m is not a parameter/);
    expect(() => parseSessionUsername('k-sesstime-5-foo-bar')).to.throw(SessionUsernameError, /"foo" after sesstime-5/);
    expect(() => parseSessionUsername('k-Mode-Sticky-session-7-x')).to.throw(SessionUsernameError, /"x" after mode-Sticky/);
    // Parameters after the stray piece do not make it one: the key would still swallow the mode.
    expect(() => parseSessionUsername('k-mode-rotating-zone-x-country-de')).to.throw(SessionUsernameError, /"zone" after mode-rotating/);
    expect(() => parseSessionUsername('k-ttl-10m-foo-ttl-5m')).to.throw(SessionUsernameError, /"foo" after ttl-10m/);
  });

  it('keeps plain keys with dashes, parameter names whose value does not fit, and session-<id> as they are', () => {
    for (const plain of ['my-crawl-3', 'dark-mode-test-1', 'my-ttl-x-1', 'a-sesstime-soon-b', 'user-session-7-x', 'x-session-abc-mode', 'mode-rotating-x', 'ttl-10m-foo']) {
      expect(parseSessionUsername(plain), plain).to.deep.equal({ key: plain, params: {} });
    }
    expect(parseSessionUsername('k%2Dmode%2Drotating%2Dzone-mode-sticky'), 'escaped, such a key is written').to.deep.equal({ key: 'k-mode-rotating-zone', params: { mode: 'sticky' } });
  });

  it('leaves a username without parameters exactly as it was (every key that worked before still does)', () => {
    for (const plain of ['alice', 'durable-0', 'header-user', 'rotating-30', 'ip:10.0.0.1', 'a-b-c-d', 'country-de', '-', '--', 'x-country', 'ü-ñ-✓']) {
      expect(parseSessionUsername(plain), plain).to.deep.equal({ key: plain, params: {} });
    }
  });

  it('percent-decodes the key of a username with parameters, so a key ending like a parameter can be written', () => {
    expect(parseSessionUsername('my%2Dcountry%2Dde-mode-sticky')).to.deep.equal({ key: 'my-country-de', params: { mode: 'sticky' } });
    expect(parseSessionUsername('plain%2Dkey').key, 'not decoded without parameters').to.equal('plain%2Dkey');
  });

  for (const [username, why] of [
    ['k-country-deu', /two-letter/],
    ['k-country-d1', /two-letter/],
    ['k-country-de,,nl', /two-letter/],
    [`k-country-${Array.from({ length: MAX_SESSION_COUNTRIES + 1 }, (_, i) => String.fromCharCode(97 + i) + 'a').join(',')}`, /at most/],
    ['k-sesstime-0', /at least 1/],
    ['k-sesstime-ten', /whole minutes/],
    ['k-ttl-5y', /duration/],
    ['k-ttl-0s', /duration/],
    ['k-mode-fast', /sticky or rotating/],
    ['k-country-de-country-nl', /twice/],
    ['k-sesstime-5-ttl-5m', /give one/],
    ['-country-de', /empty/],
    ['bad%ZZ-country-de', /escape/],
    ['k-country-d_e', /malformed/],
  ] as const) {
    it(`refuses ${JSON.stringify(username)} with a reason`, () => {
      expect(() => parseSessionUsername(username)).to.throw(SessionUsernameError, why);
    });
  }

  it('property: any username either parses or is refused with SessionUsernameError; parsed parameters are well formed', () => {
    const piece = fc.oneof(fc.constantFrom('country', 'sesstime', 'ttl', 'mode', 'de', 'nl,se', '10', '90s', 'rotating', 'sticky', ''), fc.string({ maxLength: 6 }));
    const username = fc.oneof(fc.string({ maxLength: 80 }), fc.array(piece, { maxLength: 9 }).map((p) => p.join('-')));
    fc.assert(
      fc.property(username, (u) => {
        let parsed;
        try {
          parsed = parseSessionUsername(u);
        } catch (e) {
          expect(e).to.be.instanceOf(SessionUsernameError);
          return;
        }
        if (Object.keys(parsed.params).length === 0) expect(parsed.key).to.equal(u);
        else expect(parsed.key.length).to.be.greaterThan(0);
        for (const c of parsed.params.countries ?? []) expect(c).to.match(/^[a-z]{2}$/);
        if (parsed.params.lifetimeMs !== undefined) expect(parsed.params.lifetimeMs).to.be.greaterThan(0);
      }),
    );
  });

  it('property: what a client builds from a key and parameters reads back as that key and those parameters', () => {
    const key = fc.string({ minLength: 1, maxLength: 30 });
    const countries = fc.uniqueArray(fc.stringMatching(/^[a-z]{2}$/), { minLength: 1, maxLength: MAX_SESSION_COUNTRIES });
    fc.assert(
      fc.property(key, countries, fc.integer({ min: 1, max: 1440 }), fc.constantFrom('sticky', 'rotating'), (k, cs, minutes, mode) => {
        const username = `${encodeURIComponent(k).replace(/-/g, '%2D')}-country-${cs.join(',')}-sesstime-${minutes}-mode-${mode}`;
        expect(parseSessionUsername(username)).to.deep.equal({ key: k, params: { countries: cs, lifetimeMs: minutes * 60_000, mode } });
      }),
    );
  });

  it('property: a recognised parameter followed by a piece that is not a parameter is refused, whatever stands around them', () => {
    const known = ['country', 'sesstime', 'ttl', 'mode', 'session'];
    const param = fc.oneof(
      fc.stringMatching(/^[a-z]{2}$/).map((c) => `country-${c}`),
      fc.integer({ min: 1, max: 1440 }).map((m) => `sesstime-${m}`),
      fc.tuple(fc.integer({ min: 1, max: 999 }), fc.constantFrom('', 's', 'm', 'h', 'd')).map(([n, u]) => `ttl-${n}${u}`),
      fc.constantFrom('mode-sticky', 'mode-rotating', 'MODE-Rotating'),
    );
    const stray = fc.oneof(fc.stringMatching(/^[A-Za-z0-9]{1,8}$/), fc.tuple(fc.stringMatching(/^[A-Za-z0-9]{1,8}$/), fc.stringMatching(/^[a-z0-9]{1,6}$/)).map(([a, b]) => `${a}-${b}`)).filter((p) => !known.includes(p.split('-')[0]!.toLowerCase()));
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 20 }), param, stray, fc.option(param, { nil: undefined }), (k, p, junk, tail) => {
        const username = [encodeURIComponent(k).replace(/-/g, '%2D'), p, junk, ...(tail === undefined ? [] : [tail])].join('-');
        expect(() => parseSessionUsername(username), username).to.throw(SessionUsernameError, /is not a parameter/);
      }),
    );
  });

  it('tags equal parameters equally, whatever order they were written in', () => {
    const a = parseSessionUsername('k-country-de-mode-rotating').params;
    const b = parseSessionUsername('k-mode-rotating-country-de').params;
    expect(sessionParamsTag(a)).to.equal(sessionParamsTag(b));
    expect(sessionParamsTag(a)).to.not.equal(sessionParamsTag(parseSessionUsername('k-country-nl-mode-rotating').params));
  });
});
