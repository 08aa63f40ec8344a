import { expect } from 'chai';
import fc from 'fast-check';
import '../support/fixtures/fuzz-runs.js';
import { buildUsername, DEFAULT_BLOCK_RULES, detectBlock, InvalidSessionChoice, parseProxyStatus } from '../../clients/node/src/index.js';
import { parseSessionUsername } from '../../shared/api/session-username.js';
import { proxyStatusValue } from '../../workers/proxy/http-proxy-errors.js';

const headers = (h: Record<string, string> = {}) => ({ get: (name: string) => h[name.toLowerCase()] ?? null });

describe('Node client (@exitpool/client): the parts that need no network', () => {
  it('property: a username it builds reads back, on the service, as that key and those choices', () => {
    const countries = fc.uniqueArray(fc.stringMatching(/^[a-z]{2}$/), { maxLength: 4 });
    fc.assert(
      fc.property(fc.oneof(fc.string({ minLength: 1, maxLength: 40 }), fc.array(fc.constantFrom('a', 'country', 'de', 'mode', 'x', 'session', '7', 'ttl', '%', ''), { minLength: 1, maxLength: 6 }).map((p) => p.join('-')).filter((k) => k !== '')), countries, fc.option(fc.integer({ min: 1, max: 86_400 })), fc.option(fc.constantFrom('sticky' as const, 'rotating' as const)), (key, cs, lifetime, mode) => {
        const username = buildUsername(key, { countries: cs, ...(lifetime === null ? {} : { lifetimeSeconds: lifetime }), ...(mode === null ? {} : { mode }) });
        const parsed = parseSessionUsername(username);
        expect(parsed.key).to.equal(key);
        expect(parsed.params.countries ?? []).to.deep.equal(cs);
        expect(parsed.params.lifetimeMs).to.equal(lifetime === null ? undefined : lifetime * 1000);
        if (mode !== null) expect(parsed.params.mode).to.equal(mode);
      }),
    );
  });

  it('writes a key that looks like parameters so that it reads back as itself', () => {
    for (const key of ['shop-country-de', 'a-mode-x-b', 'plain-key', 'x-session-7']) expect(parseSessionUsername(buildUsername(key)).key, key).to.equal(key);
    expect(buildUsername('plain-key'), 'left as it is when it cannot be misread').to.equal('plain-key');
  });

  it('refuses choices the service would refuse before connecting', () => {
    expect(() => buildUsername('k', { countries: ['deu'] })).to.throw(InvalidSessionChoice);
    expect(() => buildUsername('k', { lifetimeSeconds: 0.5 })).to.throw(InvalidSessionChoice);
    expect(() => buildUsername('')).to.throw(InvalidSessionChoice);
  });

  it('reads the Proxy-Status the service writes', () => {
    const value = proxyStatusValue('destination_unavailable', 'no exit in fr: none in the exit catalog "x"');
    expect(parseProxyStatus(value)).to.deep.equal({ proxy: 'exitpool', error: 'destination_unavailable', details: 'no exit in fr: none in the exit catalog "x"' });
    expect(parseProxyStatus(null)).to.equal(null);
  });

  it('calls a block by status, challenge redirect or body marker, and nothing else', () => {
    expect(detectBlock({ status: 403, headers: headers() }, '')).to.deep.include({ kind: 'blocked' });
    expect(detectBlock({ status: 429, headers: headers() }, '')).to.deep.include({ kind: 'rate_limited' });
    expect(detectBlock({ status: 302, headers: headers({ location: '/captcha?next=/' }) }, '')).to.deep.include({ kind: 'captcha' });
    expect(detectBlock({ status: 200, headers: headers() }, '<h1>Please solve this CAPTCHA</h1>')).to.deep.include({ kind: 'captcha' });
    expect(detectBlock({ status: 200, headers: headers() }, '127.0.0.1\n')).to.equal(null);
    expect(detectBlock({ status: 302, headers: headers({ location: '/login' }) }, '')).to.equal(null);
    const custom = { ...DEFAULT_BLOCK_RULES, statuses: new Map([[451, 'blocked' as const]]) };
    expect(detectBlock({ status: 451, headers: headers() }, '', custom)).to.deep.include({ kind: 'blocked' });
  });
});
