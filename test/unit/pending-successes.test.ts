import { expect } from 'chai';
import fc from 'fast-check';
import { PendingSuccesses, SUCCESS_REPORT_GRACE_MS } from '../../supervisor/verdicts/pending-successes.js';
import { fuzzRuns } from '../support/fixtures/fuzz-runs.js';

describe('successes held for a report (SUCCESS_REPORT_GRACE_MS)', () => {
  it('hands a success to health after the grace, unless a report about its session came first', () => {
    const p = new PendingSuccesses();
    const applied: [number, number][] = [];
    const apply = (i: number, t: number): number => applied.push([i, t]);
    p.hold(1, 'reported', 1000);
    p.hold(1, 'quiet', 1000);
    p.hold(2, 'reported', 1000);
    p.reported(1, 'reported', 1200);
    p.release(1000 + SUCCESS_REPORT_GRACE_MS - 1, apply);
    expect(applied).to.deep.equal([]);
    p.release(1000 + SUCCESS_REPORT_GRACE_MS, apply);
    // The report on instance 1 does not cancel the same key's success on instance 2.
    expect(applied).to.deep.equal([[1, 1000], [2, 1000]]);
    expect(p.size).to.equal(0);
  });

  it('a report cancels only a success that ended before it', () => {
    const p = new PendingSuccesses();
    const applied: number[] = [];
    p.hold(0, 'k', 5000);
    p.reported(0, 'k', 4000);
    p.release(5000 + SUCCESS_REPORT_GRACE_MS, (_i, t) => applied.push(t));
    expect(applied).to.deep.equal([5000]);
  });

  it('property: every held success is applied exactly once or cancelled, never both', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.integer({ min: 0, max: 3 }), fc.constantFrom('a', 'b', 'c'), fc.integer({ min: 0, max: 10_000 }), fc.boolean()), { maxLength: 50 }), (ops) => {
        const p = new PendingSuccesses();
        let applied = 0;
        for (const [i, key, t, report] of ops) {
          if (report) p.reported(i, key, t);
          else p.hold(i, key, t);
        }
        const before = p.size;
        p.release(20_000, () => applied++);
        expect(applied).to.equal(before);
        expect(p.size).to.equal(0);
      }),
      { numRuns: fuzzRuns(200) },
    );
  });
});
