import { expect } from 'chai';
import fc from 'fast-check';
import '../support/fixtures/fuzz-runs.js';
import {
  MAX_SESSION_COUNTRIES,
  PARAMETER_NAMES,
  parseSessionUsername,
  SessionUsernameError,
  sessionParamsTag,
  UNSUPPORTED_PARAMETER_NAMES,
  type SessionParams,
} from '../../shared/api/session-username.js';
import { paramsOfChoices, usernameVectors, type VectorParams } from '../support/clients/username-vectors.js';

const vectors = usernameVectors();

function asVector(p: SessionParams): VectorParams {
  return { ...(p.countries ? { countries: p.countries } : {}), ...(p.lifetimeMs !== undefined ? { lifetime_ms: p.lifetimeMs } : {}), ...(p.mode ? { mode: p.mode } : {}) };
}

describe('session parameters in the proxy username', () => {
  it('knows the names the shared vectors list (the clients escape a key containing any of them)', () => {
    expect([...PARAMETER_NAMES].sort()).to.deep.equal([...vectors.parameter_names].sort());
    expect([...UNSUPPORTED_PARAMETER_NAMES].sort()).to.deep.equal([...vectors.unsupported_parameter_names].sort());
    expect(MAX_SESSION_COUNTRIES, 'the vectors refuse nine countries').to.equal(8);
  });

  describe('reads each username of clients/test-vectors/usernames.json as it says', () => {
    for (const v of vectors.read) {
      if ('refused' in v) {
        it(`refuses ${JSON.stringify(v.username)} (${v.refused})`, () => {
          expect(() => parseSessionUsername(v.username)).to.throw(SessionUsernameError, new RegExp(v.refused));
        });
      } else {
        it(`reads ${JSON.stringify(v.username)} as key ${JSON.stringify(v.key)}${v.dialect ? ` (${v.dialect})` : ''}`, () => {
          const parsed = parseSessionUsername(v.username);
          expect({ key: parsed.key, params: asVector(parsed.params) }).to.deep.equal({ key: v.key, params: v.params });
        });
      }
    }
  });

  it('reads every username the clients build (the vectors’ built cases) as the key and choices it was built from', () => {
    let checked = 0;
    for (const v of vectors.built) {
      if ('invalid' in v) continue;
      const parsed = parseSessionUsername(v.username);
      expect({ key: parsed.key, params: asVector(parsed.params) }, v.username).to.deep.equal({ key: v.key, params: paramsOfChoices(v.choices, v.username) });
      checked++;
    }
    expect(checked).to.be.greaterThan(10);
  });

  it('property: any username either parses or is refused with SessionUsernameError; parsed parameters are well formed', () => {
    const piece = fc.oneof(fc.constantFrom(...PARAMETER_NAMES, ...UNSUPPORTED_PARAMETER_NAMES, 'de', 'nl,se', '10', '90s', 'rotating', 'sticky', 'us_ohio', ''), fc.string({ maxLength: 6 }));
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
        if (Object.keys(parsed.params).length === 0 && !/-sess(ion|id)-/i.test(u)) expect(parsed.key).to.equal(u);
        else expect(parsed.key.length).to.be.greaterThan(0);
        for (const c of parsed.params.countries ?? []) expect(c).to.match(/^[a-z]{2}$/);
        if (parsed.params.lifetimeMs !== undefined) expect(parsed.params.lifetimeMs).to.be.greaterThan(0);
      }),
    );
  });

  it('property: what a client builds from a key and parameters reads back as that key and those parameters, in either dialect', () => {
    const key = fc.string({ minLength: 1, maxLength: 30 });
    const countries = fc.uniqueArray(fc.stringMatching(/^[a-z]{2}$/), { minLength: 1, maxLength: MAX_SESSION_COUNTRIES });
    fc.assert(
      fc.property(key, countries, fc.integer({ min: 1, max: 1440 }), fc.constantFrom('sticky', 'rotating'), fc.constantFrom('country', 'cc'), fc.constantFrom('sesstime', 'sessionduration'), (k, cs, minutes, mode, country, lifetime) => {
        const list = country === 'cc' ? cs.slice(0, 1) : cs;
        const username = `${encodeURIComponent(k).replace(/-/g, '%2D')}-${country}-${list.join(',')}-${lifetime}-${minutes}-mode-${mode}`;
        expect(parseSessionUsername(username)).to.deep.equal({ key: k, params: { countries: list, lifetimeMs: minutes * 60_000, mode } });
      }),
    );
  });

  it('property: a recognised parameter followed by a piece that is not a parameter is refused, whatever stands around them', () => {
    const known = [...PARAMETER_NAMES, ...UNSUPPORTED_PARAMETER_NAMES] as string[];
    // A code that is itself a parameter's name (`cc`, Cocos Islands; `st`) followed by junk reads
    // from the right as that parameter with the junk for its value: refused too, for its value.
    const code = (letters: RegExp): fc.Arbitrary<string> => fc.stringMatching(letters).filter((c) => !known.includes(c.toLowerCase()));
    const param = fc.oneof(
      code(/^[a-z]{2}$/).map((c) => `country-${c}`),
      code(/^[A-Z]{2}$/).map((c) => `cc-${c}`),
      fc.integer({ min: 1, max: 1440 }).map((m) => `sesstime-${m}`),
      fc.integer({ min: 1, max: 1440 }).map((m) => `sessionduration-${m}`),
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

  it('refuses a country code that is a parameter name followed by junk, for the junk as its value', () => {
    expect(() => parseSessionUsername('acme-cc-CC-abc')).to.throw(SessionUsernameError, /"abc" is not a two-letter ISO 3166 code/);
    expect(parseSessionUsername('acme-cc-CC')).to.deep.equal({ key: 'acme', params: { countries: ['cc'] } });
  });

  it('property: a gateway targeting parameter exitpool does not support is refused wherever it stands, never taken into the key', () => {
    const unsupported = fc.oneof(
      fc.constantFrom('city-london', 'city-los_angeles', 'state-california', 'st-us_california', 'zip-10001', 'postalcode-90210', 'continent-eu', 'asn-3320'),
    );
    const params = fc.array(fc.constantFrom('country-de', 'cc-US', 'sessid-abc', 'session-9', 'sesstime-10', 'sessionduration-30', 'mode-rotating'), { maxLength: 3 });
    fc.assert(
      fc.property(fc.stringMatching(/^[a-z0-9]{1,10}$/), params, unsupported, params, (k, before, u, after) => {
        const username = [k, ...before, u, ...after].join('-');
        expect(() => parseSessionUsername(username), username).to.throw(SessionUsernameError, /is not supported|given twice|give one/);
      }),
    );
  });

  it('tags equal parameters equally, whatever order or dialect they were written in', () => {
    const a = parseSessionUsername('k-country-de-mode-rotating').params;
    const b = parseSessionUsername('k-mode-rotating-cc-DE').params;
    expect(sessionParamsTag(a)).to.equal(sessionParamsTag(b));
    expect(sessionParamsTag(parseSessionUsername('k-sesstime-10').params)).to.equal(sessionParamsTag(parseSessionUsername('k-sessionduration-10').params));
    expect(sessionParamsTag(a)).to.not.equal(sessionParamsTag(parseSessionUsername('k-country-nl-mode-rotating').params));
  });
});
