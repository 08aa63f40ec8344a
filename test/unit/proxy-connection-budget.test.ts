import { expect } from 'chai';
import fc from 'fast-check';
import { ConnectionBudget, REFUSAL_LOG_INTERVAL_MS, type EvictableConnection } from '../../workers/proxy/connection-budget.js';
import { fuzzRuns } from '../support/fixtures/fuzz-runs.js';
import { capturingLogger } from '../support/fakes/proxy-parts.js';

/** A connection as the listeners hold one: destroy() gives its slot back at once. */
class FakeConnection implements EvictableConnection {
  destroyed = false;
  constructor(private readonly budget: ConnectionBudget) {}
  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.budget.release(this);
  }
}

function admit(budget: ConnectionBudget, listener = 'socks'): FakeConnection | null {
  if (!budget.tryAcquire(listener)) return null;
  const c = new FakeConnection(budget);
  budget.holdUnauthenticated(c, listener);
  return c;
}

describe('proxy: connection budget per worker', () => {
  it('holds at most the limit of authenticated connections and refuses beyond it', () => {
    const budget = new ConnectionBudget(2, capturingLogger().logger);
    expect(budget.tryAcquire('socks')).to.equal(true);
    expect(budget.tryAcquire('http')).to.equal(true);
    expect(budget.tryAcquire('socks')).to.equal(false);
    expect(budget.inUse).to.equal(2);
    budget.release();
    expect(budget.tryAcquire('socks')).to.equal(true);
    budget.release();
    budget.release();
    budget.release(); // one release too many never makes room beyond the limit
    expect(budget.inUse).to.equal(0);
    expect([budget.tryAcquire('socks'), budget.tryAcquire('socks'), budget.tryAcquire('socks')]).to.deep.equal([true, true, false]);
  });

  it('counts every refusal for the accounting batch and logs them at most once per interval, with the count', () => {
    const { logger, lines } = capturingLogger();
    let now = 0;
    const budget = new ConnectionBudget(0, logger, () => now);
    for (let i = 0; i < 5; i++) expect(budget.tryAcquire('http')).to.equal(false);
    expect(lines).to.have.length(1);
    expect(lines[0]).to.deep.include({ level: 'warn', limit: 0, occurrences: 1, listener: 'http', setting: 'MAX_CONNECTIONS_PER_WORKER' });
    now += REFUSAL_LOG_INTERVAL_MS;
    expect(budget.tryAcquire('socks')).to.equal(false);
    expect(lines).to.have.length(2);
    expect(lines[1]).to.deep.include({ occurrences: 5, listener: 'socks' });
    expect(budget.takeRefusedCount()).to.equal(6);
    expect(budget.takeRefusedCount()).to.equal(0);
  });

  it('a full worker makes room by evicting the oldest unauthenticated connection, never an authenticated one', () => {
    const budget = new ConnectionBudget(3, capturingLogger().logger);
    const a = admit(budget) as FakeConnection;
    const b = admit(budget) as FakeConnection;
    const c = admit(budget) as FakeConnection;
    budget.authenticated(b);
    const d = admit(budget);
    expect(d, 'admitted').to.not.equal(null);
    expect([a.destroyed, b.destroyed, c.destroyed]).to.deep.equal([true, false, false]);
    const e = admit(budget);
    expect(e).to.not.equal(null);
    expect(c.destroyed, 'then the next oldest').to.equal(true);
    budget.authenticated(d as FakeConnection);
    budget.authenticated(e as FakeConnection);
    expect(budget.tryAcquire('socks'), 'every held connection authenticated: refused').to.equal(false);
    expect(b.destroyed).to.equal(false);
    expect(budget.takeEvictedCount()).to.equal(2);
    expect(budget.takeRefusedCount()).to.equal(1);
    expect(budget.inUse).to.equal(3);
  });

  it('holds at most MAX_UNAUTHENTICATED_PER_WORKER unauthenticated connections, evicting in arrival order', () => {
    const budget = new ConnectionBudget(100, capturingLogger().logger, undefined, 2);
    const conns = Array.from({ length: 5 }, () => admit(budget) as FakeConnection);
    expect(conns.map((c) => c.destroyed)).to.deep.equal([true, true, true, false, false]);
    expect(budget.unauthenticated).to.equal(2);
    expect(budget.inUse).to.equal(2);
    // An authenticated connection leaves the queue; releasing it twice changes nothing.
    budget.authenticated(conns[3] as FakeConnection);
    expect(budget.unauthenticated).to.equal(1);
    conns[4]?.destroy();
    expect(budget.unauthenticated).to.equal(0);
    expect(budget.inUse).to.equal(1);
  });

  it('caps the unauthenticated share at the whole limit', () => {
    const budget = new ConnectionBudget(4, capturingLogger().logger, undefined, 1000);
    expect(budget.unauthenticatedLimit).to.equal(4);
  });

  it('keeps the arrival order exact through any sequence of admissions, authentications and closes', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.constantFrom('admit', 'auth', 'close'), fc.nat(20)), { maxLength: 200 }), (ops) => {
        const budget = new ConnectionBudget(8, capturingLogger().logger, undefined, 5);
        const live: FakeConnection[] = [];
        const unauth: FakeConnection[] = []; // model: oldest first
        for (const [op, n] of ops) {
          if (op === 'admit') {
            const full = live.length >= 8;
            const c = admit(budget);
            if (full && unauth.length === 0) {
              expect(c).to.equal(null);
              continue;
            }
            expect(c).to.not.equal(null);
            if (full) unauth.shift();
            live.push(c as FakeConnection);
            unauth.push(c as FakeConnection);
            if (unauth.length > 5) unauth.shift();
          } else if (live.length > 0) {
            const c = live[n % live.length] as FakeConnection;
            if (op === 'auth') {
              budget.authenticated(c);
              const i = unauth.indexOf(c);
              if (i >= 0) unauth.splice(i, 1);
            } else {
              c.destroy();
              const i = unauth.indexOf(c);
              if (i >= 0) unauth.splice(i, 1);
            }
          }
          for (let i = live.length - 1; i >= 0; i--) if (live[i]?.destroyed) live.splice(i, 1);
          expect(budget.inUse).to.equal(live.length);
          expect(budget.unauthenticated).to.equal(unauth.length);
        }
      }),
      { numRuns: fuzzRuns(200) },
    );
  });
});
