import { expect } from 'chai';
import fc from 'fast-check';
import { fuzzRuns } from '../support/fixtures/fuzz-runs.js';
import {
  FAILURE_KINDS,
  FailureReportInvalidError,
  MAX_FAILURE_REASON_LENGTH,
  kindFromText,
  readFailureReport,
  sanitiseReason,
  type FailureKind,
} from '../../shared/health/failure-kind.js';

 
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;

describe('health: failure report reading', () => {
  const bodies: [string, unknown, FailureKind, string][] = [
    ['no body', undefined, 'other', ''],
    ['null body', null, 'other', ''],
    ['empty object (what a JSON parser leaves)', {}, 'other', ''],
    ['kind captcha', { kind: 'captcha' }, 'captcha', ''],
    ['kind blocked', { kind: 'blocked' }, 'blocked', ''],
    ['kind transport', { kind: 'transport' }, 'transport', ''],
    ['kind other', { kind: 'other' }, 'other', ''],
    ['kind rate_limited', { kind: 'rate_limited' }, 'rate_limited', ''],
    ['kind in capitals and blanks', { kind: '  CAPTCHA ' }, 'captcha', ''],
    ['unknown kind counts as other', { kind: 'bogus' }, 'other', ''],
    ['unknown kind wins over a known reason', { kind: 'bogus', reason: 'captcha' }, 'other', 'captcha'],
    ['kind as an alias', { kind: 'http_403' }, 'blocked', ''],
    ['kind null is absent', { kind: null, reason: '429' }, 'rate_limited', '429'],
    ['blank kind is absent', { kind: '  ', reason: 'challenge' }, 'captcha', 'challenge'],
    ['kind wins over reason', { kind: 'transport', reason: 'captcha' }, 'transport', 'captcha'],
    ['reason only, free text', { reason: 'the page looked odd' }, 'other', 'the page looked odd'],
    ['reason null', { reason: null }, 'other', ''],
    ['extra fields ignored', { kind: 'blocked', session: 5, nested: { a: 1 } }, 'blocked', ''],
  ];
  for (const [name, body, kind, reason] of bodies) {
    it(`reads ${name} as ${kind}`, () => expect(readFailureReport(body)).to.deep.equal({ kind, reason, domain: '' }));
  }

  const aliases: [string, FailureKind][] = [
    ['http_403', 'blocked'],
    ['HTTP 403', 'blocked'],
    ['http-403', 'blocked'],
    ['403', 'blocked'],
    ['401', 'blocked'],
    ['451', 'blocked'],
    ['status 403', 'blocked'],
    ['forbidden', 'blocked'],
    ['Access Denied', 'blocked'],
    ['blocked', 'blocked'],
    ['challenge', 'captcha'],
    ['captcha', 'captcha'],
    ['reCAPTCHA', 'captcha'],
    ['transport', 'transport'],
    ['timeout', 'transport'],
    ['timed out', 'transport'],
    ['reset', 'transport'],
    ['connection reset', 'transport'],
    ['ECONNREFUSED', 'transport'],
    ['refused', 'transport'],
    ['429', 'rate_limited'],
    ['http_429', 'rate_limited'],
    ['rate_limited', 'rate_limited'],
    ['rate-limited', 'rate_limited'],
    ['Too Many Requests', 'rate_limited'],
    ['500', 'other'],
    ['502', 'other'],
    ['503', 'other'],
    ['404', 'other'],
    ['200', 'other'],
    ['other', 'other'],
    ['', 'other'],
    ['no captcha here, just slow', 'other'],
    ['4033', 'other'],
    ['http_4xx', 'other'],
  ];
  for (const [text, kind] of aliases) {
    it(`types reason ${JSON.stringify(text)} as ${kind}`, () => {
      expect(kindFromText(text)).to.equal(kind);
      expect(readFailureReport({ reason: text }).kind).to.equal(kind);
    });
  }

  const wrongTypes: [string, unknown, 'body' | 'kind' | 'reason' | 'domain'][] = [
    ['a number domain', { kind: 'captcha', domain: 5 }, 'domain'],
    ['a domain that is not a host name', { kind: 'captcha', domain: 'exa mple.com' }, 'domain'],
    ['a domain with a header injection', { domain: 'a.com\r\nX: y' }, 'domain'],
    ['an overlong domain', { domain: `${'a'.repeat(63)}.`.repeat(5) + 'com' }, 'domain'],
    ['a number kind', { kind: 5 }, 'kind'],
    ['an object reason', { reason: {} }, 'reason'],
    ['a boolean kind', { kind: true, reason: 'x' }, 'kind'],
    ['an array reason', { kind: 'captcha', reason: ['a'] }, 'reason'],
    ['an array body', ['captcha'], 'body'],
    ['a string body', 'captcha', 'body'],
    ['a number body', 42, 'body'],
    ['a boolean body', false, 'body'],
  ];
  for (const [name, body, field] of wrongTypes) {
    it(`refuses ${name} with a typed error naming ${field} (400)`, () => {
      let caught: unknown;
      try {
        readFailureReport(body);
      } catch (e) {
        caught = e;
      }
      expect(caught).to.be.instanceOf(FailureReportInvalidError);
      expect((caught as FailureReportInvalidError).field).to.equal(field);
    });
  }

  it('reads the site a report names, normalised (lower case, no trailing dot); blank is none', () => {
    expect(readFailureReport({ kind: 'captcha', domain: 'Shop.Example.COM.' })).to.deep.equal({ kind: 'captcha', reason: '', domain: 'shop.example.com' });
    expect(readFailureReport({ kind: 'blocked', domain: '  ' }).domain).to.equal('');
    expect(readFailureReport({ domain: '192.0.2.7' }).domain).to.equal('192.0.2.7');
  });

  it('accepts every host name and refuses everything else as a domain, never throwing otherwise (property)', () => {
    fc.assert(
      fc.property(fc.domain(), (d) => readFailureReport({ kind: 'captcha', domain: d }).domain === d.toLowerCase()),
    );
    fc.assert(
      fc.property(fc.string(), (text) => {
        try {
          const d = readFailureReport({ domain: text }).domain;
          return d === '' || /^[a-z0-9.-]{1,253}$/.test(d);
        } catch (e) {
          return e instanceof FailureReportInvalidError && e.field === 'domain';
        }
      }),
    );
  });

  it('strips control characters from the reason and bounds its length', () => {
    expect(sanitiseReason('  a\nb\r\tc\u0000d\u001b[31m\u2028e\u202e  ')).to.equal('a b  c d [31m e');
    const long = readFailureReport({ reason: 'x'.repeat(10_000) });
    expect(long.reason).to.have.length(MAX_FAILURE_REASON_LENGTH);
    expect(long.kind).to.equal('other');
  });

  it('never splits a surrogate pair when truncating', () => {
    const r = sanitiseReason('😀'.repeat(MAX_FAILURE_REASON_LENGTH + 10));
    expect(Array.from(r)).to.have.length(MAX_FAILURE_REASON_LENGTH);
    expect(r).to.equal('😀'.repeat(MAX_FAILURE_REASON_LENGTH));
  });

  it('never throws on arbitrary JSON except the typed error (property)', () => {
    const body = fc.oneof(fc.jsonValue(), fc.record({ kind: fc.jsonValue(), reason: fc.jsonValue() }, { requiredKeys: [] }));
    fc.assert(
      fc.property(body, (b) => {
        try {
          const r = readFailureReport(b);
          expect(FAILURE_KINDS).to.include(r.kind);
          expect(r.reason.length).to.be.at.most(2 * MAX_FAILURE_REASON_LENGTH);
        } catch (e) {
          expect(e).to.be.instanceOf(FailureReportInvalidError);
        }
      }),
      { numRuns: fuzzRuns(2000) },
    );
  });

  it('accepts every object whose kind and reason are strings or absent (property)', () => {
    const text = fc.oneof(fc.string(), fc.string({ unit: 'binary' }), fc.constantFrom(...FAILURE_KINDS, 'http_403', '429', 'challenge'));
    fc.assert(
      fc.property(fc.record({ kind: text, reason: text }, { requiredKeys: [] }), (b) => {
        const r = readFailureReport(b);
        expect(FAILURE_KINDS).to.include(r.kind);
        expect(Array.from(r.reason).length).to.be.at.most(MAX_FAILURE_REASON_LENGTH);
        expect(CONTROL.test(r.reason)).to.equal(false);
      }),
      { numRuns: fuzzRuns(2000) },
    );
  });

  it('reads every kind name as itself whatever its case and surrounding blanks (property)', () => {
    fc.assert(
      fc.property(fc.constantFrom(...FAILURE_KINDS), fc.boolean(), fc.string({ unit: fc.constantFrom(' ', '\t') }), (kind, upper, pad) => {
        const text = pad + (upper ? kind.toUpperCase() : kind) + pad;
        expect(readFailureReport({ kind: text }).kind).to.equal(kind);
        expect(readFailureReport({ reason: text }).kind).to.equal(kind);
      }),
    );
  });
});
