import { expect } from 'chai';
import { ConnectionBudget, REFUSAL_LOG_INTERVAL_MS } from '../../workers/proxy/connection-budget.js';
import { capturingLogger } from '../support/proxy-fakes.js';

describe('proxy: connection budget per worker', () => {
  it('holds up to its limit, refuses beyond it, and takes connections again as they end', () => {
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
    expect(lines[0]).to.deep.include({ level: 'warn', limit: 0, refused: 1, listener: 'http', setting: 'MAX_CONNECTIONS_PER_WORKER' });
    now += REFUSAL_LOG_INTERVAL_MS;
    expect(budget.tryAcquire('socks')).to.equal(false);
    expect(lines).to.have.length(2);
    expect(lines[1]).to.deep.include({ refused: 5, listener: 'socks' });
    expect(budget.takeRefusedCount()).to.equal(6);
    expect(budget.takeRefusedCount()).to.equal(0);
  });
});
