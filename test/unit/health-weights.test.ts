import { expect } from 'chai';
import fc from 'fast-check';
import '../support/fixtures/fuzz-runs.js';
import { FAILURE_KINDS } from '../../shared/health/failure-kind.js';
import { failureWeights, scoringRules } from '../../supervisor/health/weights.js';

describe('health: failure weights', () => {
  const table: [number, { captcha: number; blocked: number; transport: number; other: number; rate_limited: number }][] = [
    [1, { captcha: 1.5, blocked: 1.25, transport: 1, other: 1, rate_limited: 0.25 }],
    [2, { captcha: 1.5, blocked: 1.25, transport: 1, other: 1, rate_limited: 0.25 }],
    [3, { captcha: 1.5, blocked: 1.25, transport: 1, other: 1, rate_limited: 0.25 }],
    [4, { captcha: 2, blocked: 1.5, transport: 1, other: 1, rate_limited: 0.25 }],
    [5, { captcha: 2.5, blocked: 1.75, transport: 1, other: 1, rate_limited: 0.25 }],
    [10, { captcha: 5, blocked: 3, transport: 1, other: 1, rate_limited: 0.25 }],
  ];
  for (const [s, weights] of table) {
    it(`QUARANTINE_FAILURES=${s} gives ${JSON.stringify(weights)}`, () => expect(failureWeights(s)).to.deep.equal(weights));
  }

  it('with the default of 5 a captcha is half the quarantine score, so two quarantine', () => {
    const w = failureWeights(5);
    expect(w.captcha).to.equal(2.5);
    expect(2 * w.captcha).to.equal(5);
  });

  it('orders captcha > blocked > transport = other = 1 > rate_limited > 0 for every QUARANTINE_FAILURES (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 1000 }), (s) => {
        const w = failureWeights(s);
        expect(w.captcha).to.be.greaterThan(w.blocked);
        expect(w.blocked).to.be.greaterThan(w.other);
        expect(w.transport).to.equal(1);
        expect(w.other).to.equal(1);
        expect(w.rate_limited).to.be.lessThan(1).and.greaterThan(0);
      }),
    );
  });

  it('keeps every single report below the quarantine score unless QUARANTINE_FAILURES is 1 (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 2, max: 1000 }), fc.constantFrom(...FAILURE_KINDS), (s, kind) => {
        expect(failureWeights(s)[kind]).to.be.lessThan(s);
      }),
    );
    const one = failureWeights(1);
    for (const kind of ['captcha', 'blocked', 'transport', 'other'] as const) expect(one[kind]).to.be.at.least(1);
    expect(one.rate_limited).to.be.lessThan(1);
  });

  it('lets two captchas reach the quarantine score for every QUARANTINE_FAILURES (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 1000 }), (s) => {
        expect(2 * failureWeights(s).captcha).to.be.at.least(s);
      }),
    );
  });

  it('uses multiples of 1/4 only, so window sums are exact (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 1000 }), (s) => {
        const r = scoringRules(s);
        for (const kind of FAILURE_KINDS) expect(Number.isInteger(r.weights[kind] * 4)).to.equal(true);
        expect(Number.isInteger(r.rateLimitedCap * 4)).to.equal(true);
      }),
    );
  });

  it('caps the rate limits below the quarantine score', () => {
    for (const s of [1, 2, 3, 5, 100]) {
      const r = scoringRules(s);
      expect(r.quarantineScore).to.equal(s);
      expect(r.rateLimitedCap).to.equal(s / 2);
      expect(r.rateLimitedCap).to.be.lessThan(s);
    }
  });

  for (const bad of [0, -1, 2.5, Number.NaN]) {
    it(`refuses QUARANTINE_FAILURES=${bad}`, () => expect(() => failureWeights(bad)).to.throw(RangeError));
  }
});
