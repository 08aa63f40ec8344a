import { expect } from 'chai';
import fc from 'fast-check';
import '../support/fixtures/fuzz-runs.js';
import {
  buildUsername,
  DEFAULT_BLOCK_RULES,
  defaultBanPolicy,
  detectBlock,
  InvalidSessionChoice,
  PARAMETER_NAMES,
  parseProxyStatus,
  parseProxyStatusList,
  reportDomain,
  retryAfterSeconds,
  UNSUPPORTED_PARAMETER_NAMES,
  type SessionChoices,
} from '../../clients/node/src/index.js';
import { unsupportedNodeMessage, SUPPORTED_NODE } from '../../clients/node/src/node-version.js';
import { parseSessionUsername } from '../../shared/api/session-username.js';
import { normaliseDomain } from '../../shared/health/failure-kind.js';
import { proxyStatusValue } from '../../workers/proxy/http-proxy-errors.js';
import { bodyOf, testPageCases } from '../support/clients/test-pages.js';
import { usernameVectors, type BuildChoices } from '../support/clients/username-vectors.js';

const headers = (h: Record<string, string> = {}) => ({ get: (name: string) => h[name.toLowerCase()] ?? null });

function choicesOf(c: BuildChoices): SessionChoices {
  return {
    ...(c.countries === undefined ? {} : { countries: c.countries }),
    ...(c.lifetime_seconds === undefined ? {} : { lifetimeSeconds: c.lifetime_seconds }),
    ...(c.mode === undefined ? {} : { mode: c.mode as SessionChoices['mode'] & string }),
  };
}

describe('Node client (@exitpool/client): the parts that need no network', () => {
  describe('usernames (clients/test-vectors/usernames.json)', () => {
    const vectors = usernameVectors();

    it('knows every name the service reads or refuses, as the vectors list them', () => {
      expect([...PARAMETER_NAMES].sort()).to.deep.equal([...vectors.parameter_names].sort());
      expect([...UNSUPPORTED_PARAMETER_NAMES].sort()).to.deep.equal([...vectors.unsupported_parameter_names].sort());
    });

    for (const v of vectors.built) {
      if ('invalid' in v) {
        it(`refuses to build ${JSON.stringify(v.key)} with ${JSON.stringify(v.choices)} (${v.invalid})`, () => {
          expect(() => buildUsername(v.key, choicesOf(v.choices))).to.throw(InvalidSessionChoice, new RegExp(v.invalid));
        });
      } else {
        it(`builds ${JSON.stringify(v.username)}`, () => {
          expect(buildUsername(v.key, choicesOf(v.choices))).to.equal(v.username);
        });
      }
    }

    it('property: a username it builds reads back, on the service, as that key and those choices', () => {
      const names = [...PARAMETER_NAMES, ...UNSUPPORTED_PARAMETER_NAMES];
      const countries = fc.uniqueArray(fc.stringMatching(/^[a-z]{2}$/), { maxLength: 4 });
      const key = fc.oneof(
        fc.string({ minLength: 1, maxLength: 40 }),
        fc.array(fc.constantFrom('a', 'de', 'x', '7', '%', '', 'us_ohio', '10001', ...names), { minLength: 1, maxLength: 6 }).map((p) => p.join('-')).filter((k) => k !== ''),
      );
      fc.assert(
        fc.property(key, countries, fc.option(fc.integer({ min: 1, max: 86_400 })), fc.option(fc.constantFrom('sticky' as const, 'rotating' as const)), (k, cs, lifetime, mode) => {
          const username = buildUsername(k, { countries: cs, ...(lifetime === null ? {} : { lifetimeSeconds: lifetime }), ...(mode === null ? {} : { mode }) });
          const parsed = parseSessionUsername(username);
          expect(parsed.key).to.equal(k);
          expect(parsed.params.countries ?? []).to.deep.equal(cs);
          expect(parsed.params.lifetimeMs).to.equal(lifetime === null ? undefined : lifetime * 1000);
          if (mode !== null) expect(parsed.params.mode).to.equal(mode);
        }),
      );
    });
  });

  describe('Proxy-Status, an RFC 8941 List', () => {
    it('reads the field the service writes, details with ; and , and quotes included', () => {
      const details = 'session parameters: "zone" after country-de is not a parameter (exitpool reads country or cc, session or sessid, sesstime, sessionduration or ttl, mode); write a dash of the key as %2D';
      expect(parseProxyStatus(proxyStatusValue('http_request_error', details))).to.deep.equal({ proxy: 'exitpool', error: 'http_request_error', details });
      expect(parseProxyStatus(proxyStatusValue('destination_unavailable', 'no exit in fr: none in the exit catalog "x"'))).to.deep.equal({
        proxy: 'exitpool',
        error: 'destination_unavailable',
        details: 'no exit in fr: none in the exit catalog "x"',
      });
    });

    it('finds exitpool’s member among other intermediaries’, and ignores what is absent or malformed', () => {
      const field = 'cdn.example; error=http_upstream_503, exitpool; error=destination_unavailable; details="no exit in zz"; received-status=503';
      expect(parseProxyStatusList(field).map((m) => m.proxy)).to.deep.equal(['cdn.example', 'exitpool']);
      expect(parseProxyStatus(field)).to.deep.equal({ proxy: 'exitpool', error: 'destination_unavailable', details: 'no exit in zz' });
      expect(parseProxyStatus('"exitpool"; error=dns_error')?.error, 'a String names a proxy too').to.equal('dns_error');
      for (const bad of [null, undefined, '', 'exitpool; details="unterminated', 'exitpool; error=', '(exitpool); error=x', '?', 'exitpool;; error=x']) expect(parseProxyStatus(bad), String(bad)).to.equal(null);
      expect(parseProxyStatus('other; error=dns_error'), 'another proxy’s member is not exitpool’s').to.equal(null);
    });

    it('property: whatever details the service writes, they read back as written', () => {
      fc.assert(
        fc.property(fc.string({ maxLength: 120 }).map((s) => s.replace(/[^\x20-\x7e]/g, '?')), (details) => {
          expect(parseProxyStatus(proxyStatusValue('destination_unavailable', details))?.details).to.equal(details);
        }),
      );
    });
  });

  describe('block detection: the corpus of clients/test-pages', () => {
    const cases = testPageCases();
    for (const c of cases) {
      it(`${c.expect === null ? 'no block' : `${c.expect.kind}${c.expect.vendor ? ` (${c.expect.vendor})` : ''}`}: ${c.name}`, () => {
        const block = defaultBanPolicy({ status: c.status, headers: headers(c.headers), body: bodyOf(c), url: c.url, redirectedTo: c.redirected_to ?? [] });
        if (c.expect === null) {
          expect(block, JSON.stringify(block)).to.equal(null);
          return;
        }
        expect(block?.kind).to.equal(c.expect.kind);
        expect(block?.vendor).to.equal(c.expect.vendor);
        if (c.expect.retry_after_seconds !== undefined) expect(block?.retryAfterSeconds).to.equal(c.expect.retry_after_seconds);
        if (c.report_domain !== undefined) expect(reportDomain(block?.site ?? c.url) ?? null).to.equal(c.report_domain);
      });
    }

    it('has ordinary pages and a challenge of every vendor, and names domains the API takes', () => {
      expect(cases.filter((c) => c.expect === null).length).to.be.at.least(15);
      const vendors = new Set(cases.map((c) => c.expect?.vendor).filter((v) => v !== undefined));
      for (const v of ['cloudflare', 'datadome', 'perimeterx', 'akamai', 'imperva', 'recaptcha', 'hcaptcha']) expect(vendors, v).to.include(v);
      for (const c of cases) {
        if (typeof c.report_domain === 'string') expect(normaliseDomain(c.report_domain), c.name).to.equal(c.report_domain);
        if (c.report_domain === null) expect(normaliseDomain(new URL(c.url).hostname), c.name).to.equal(undefined);
      }
    });
  });

  describe('the ban policy’s other rules', () => {
    it('reads body markers only when asked to, and only on 200', () => {
      const rules = { ...DEFAULT_BLOCK_RULES, bodyMarkers: [{ pattern: /queue-it/i, kind: 'rate_limited' as const }] };
      expect(detectBlock({ status: 200, headers: headers() }, 'You are in line (Queue-it)')).to.equal(null);
      expect(detectBlock({ status: 200, headers: headers() }, 'You are in line (Queue-it)', rules)).to.deep.include({ kind: 'rate_limited' });
      expect(detectBlock({ status: 404, headers: headers() }, 'You are in line (Queue-it)', rules)).to.equal(null);
    });

    it('takes statuses of the caller’s choosing', () => {
      const custom = { ...DEFAULT_BLOCK_RULES, statuses: new Map([[451, 'blocked' as const]]) };
      expect(detectBlock({ status: 451, headers: headers() }, '', custom)).to.deep.include({ kind: 'blocked' });
      expect(detectBlock({ status: 403, headers: headers() }, '', custom)).to.equal(null);
    });

    it('reads Retry-After as seconds or as a date', () => {
      expect(retryAfterSeconds('120')).to.equal(120);
      expect(retryAfterSeconds(new Date(Date.UTC(2030, 0, 1, 0, 1, 0)).toUTCString(), Date.UTC(2030, 0, 1))).to.equal(60);
      for (const bad of [null, '', 'soon', '-1']) expect(retryAfterSeconds(bad), String(bad)).to.equal(undefined);
    });
  });

  it('names the Node.js it needs, and refuses an older one with a message that says so', () => {
    expect(unsupportedNodeMessage(SUPPORTED_NODE)).to.equal(null);
    expect(unsupportedNodeMessage('24.0.0')).to.equal(null);
    expect(unsupportedNodeMessage('22.20.1')).to.equal(null);
    for (const old of ['20.20.2', '22.18.9', '18.0.0']) expect(unsupportedNodeMessage(old), old).to.match(new RegExp(`needs Node\\.js ${SUPPORTED_NODE.replace(/\./g, '\\.')} or later; this is Node\\.js ${old.replace(/\./g, '\\.')}`));
  });
});
