import { expect } from 'chai';
import fc from 'fast-check';
import { routableFloor, routableFloorFor } from '../../shared/config/values.js';
import { BanGuard } from '../../supervisor/verdicts/ban-guard.js';
import type { BudgetCounter } from '../../supervisor/verdicts/budget-counter.js';
import { ReportBudget, RoutableFloorGuard } from '../../supervisor/verdicts/client-evidence.js';
import { classifyFailure } from '../../supervisor/verdicts/failure-classes.js';
import { fuzzRuns } from '../support/fixtures/fuzz-runs.js';
import { quietLogger } from '../support/fakes/quiet-logger.js';

describe('client evidence guards (report budget, routable floor)', () => {
  it('spends a budget per credential per window', () => {
    const clock = { now: 0 };
    const budget = new ReportBudget({ attempts: 3, windowMs: 60_000 }, () => clock.now);
    const alice = { kind: 'token', id: 'alice' } as const;
    expect([1, 2, 3, 4, 5].map(() => budget.take(alice))).to.deep.equal([true, true, true, false, false]);
    expect(budget.take({ kind: 'token', id: 'bob' }), 'another token has its own').to.equal(true);
    expect(budget.take({ kind: 'sign-in', user: 'alice' }), 'a sign-in is another credential').to.equal(true);
    clock.now += 60_000;
    expect(budget.take(alice), 'a new window').to.equal(true);
  });

  it('counts through the BudgetCounter it is given (a fleet’s, counted across its nodes)', () => {
    const spent: string[] = [];
    const shared: BudgetCounter = { take: (c) => (spent.push(c), spent.length <= 2), wouldAllow: () => spent.length < 2 };
    const budget = new ReportBudget({ attempts: 100, windowMs: 60_000 }, () => 0, shared);
    expect([1, 2, 3].map(() => budget.take({ kind: 'token', id: 'alice' }))).to.deep.equal([true, true, false]);
    expect(spent).to.deep.equal(['token:alice', 'token:alice', 'token:alice']);
    const guard = new BanGuard({ attempts: 100, windowMs: 60_000 }, { minEligibleExits: { kind: 'count', count: 0 }, minEligibleExitsPerCountry: 0 }, () => 0, shared);
    expect(guard.permits(['token:alice'], { catalog: 10, eligible: 9, country: '', eligibleInCountry: 0 })).to.deep.equal({ ok: false, why: 'token:alice has used its CLIENT_BAN_BUDGET' });
  });

  it("tells the instance's own failures from the client's destination's, and what cannot be told", () => {
    expect(classifyFailure({ kind: 'dial', scored: true })).to.deep.equal({ kind: 'tor' });
    expect(classifyFailure({ kind: 'timeout', scored: true }), 'a deadline before tor answered its handshake').to.deep.equal({ kind: 'tor' });
    expect(classifyFailure({ kind: 'timeout', scored: true, destination: 'a.example:443' })).to.deep.equal({ kind: 'destination', destination: 'a.example:443', outcome: 'timeout' });
    for (const reply of [1, 4, 5, 6]) {
      expect(classifyFailure({ kind: 'socks_refused', socksReply: reply, scored: true, destination: 'a.example:80' }), `reply ${reply}`).to.deep.equal({ kind: 'destination', destination: 'a.example:80', outcome: `reply:${reply}` });
      expect(classifyFailure({ kind: 'socks_refused', socksReply: reply, scored: true }), `reply ${reply} with nothing to check`).to.deep.equal({ kind: 'unknown' });
    }
    for (const reply of [2, 3, 7, 8]) expect(classifyFailure({ kind: 'socks_refused', socksReply: reply, scored: true, destination: 'a.example:80' }), `reply ${reply}`).to.deep.equal({ kind: 'excused' });
    expect(classifyFailure({ kind: 'socks_refused', socksReply: 4, scored: false, destination: '10.0.0.1:80' }), 'a private destination').to.deep.equal({ kind: 'excused' });
    expect(classifyFailure({ kind: 'reset', scored: true }), 'a tunnel broken mid-way').to.deep.equal({ kind: 'unknown' });
  });

  it('spends a connection credential’s budget like its reports', () => {
    const budget = new ReportBudget({ attempts: 2, windowMs: 60_000 }, () => 0);
    expect(budget.take({ kind: 'token', id: 'alice' })).to.equal(true);
    expect(budget.takeCredential('token:alice')).to.equal(true);
    expect(budget.takeCredential('token:alice'), 'one budget for reports and blamed destination failures').to.equal(false);
  });

  it('reads MIN_ROUTABLE and resolves it for a pool size', () => {
    expect(routableFloor('25%')).to.deep.equal({ kind: 'share', percent: 25 });
    expect(routableFloor('3')).to.deep.equal({ kind: 'count', count: 3 });
    for (const bad of ['0', '0%', '101%', 'half', '-1', '']) expect(() => routableFloor(bad), bad).to.throw();
    expect(routableFloorFor({ kind: 'share', percent: 25 }, 4)).to.equal(1);
    expect(routableFloorFor({ kind: 'share', percent: 25 }, 10)).to.equal(3);
    expect(routableFloorFor({ kind: 'count', count: 8 }, 5), 'never above the pool').to.equal(5);
  });

  it('property: the floor is between 1 and the pool size, and the guard allows exactly while that many stay', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 100 }), fc.integer({ min: 1, max: 64 }), fc.integer({ min: 0, max: 64 }), (percent, size, routable) => {
        const floor = { kind: 'share', percent } as const;
        const n = routableFloorFor(floor, size);
        expect(n).to.be.within(1, size);
        expect(new RoutableFloorGuard(floor, quietLogger()).allows(routable, size, 0)).to.equal(routable - 1 >= n);
      }),
      { numRuns: fuzzRuns(200) },
    );
  });
});
