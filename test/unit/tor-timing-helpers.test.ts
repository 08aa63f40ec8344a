import { expect } from 'chai';
import { Backoff } from '../../supervisor/tor/backoff.js';
import { DelayScope } from '../../supervisor/tor/delay-scope.js';
import { NewnymCooldown } from '../../supervisor/tor/newnym-cooldown.js';
import { parseBootstrapLogLine, logLineSeverity } from '../../supervisor/tor/tor-log-line.js';

describe('tor timing helpers', () => {
  it('backoff doubles up to its ceiling and resets', () => {
    const b = new Backoff(100, 500);
    expect([b.next(), b.next(), b.next(), b.next(), b.next()]).to.deep.equal([100, 200, 400, 500, 500]);
    expect(b.attemptCount).to.equal(5);
    b.reset();
    expect(b.next()).to.equal(100);
    expect(() => new Backoff(0, 10)).to.throw(RangeError);
    expect(() => new Backoff(10, 5)).to.throw(RangeError);
  });

  it('NEWNYM cooldown is tracked client-side', () => {
    const c = new NewnymCooldown(10_000);
    expect(c.msUntilAllowed(1_000)).to.equal(0);
    expect(c.endsAt()).to.equal(undefined);
    c.markSent(1_000);
    expect(c.msUntilAllowed(1_000)).to.equal(10_000);
    expect(c.msUntilAllowed(7_500)).to.equal(3_500);
    expect(c.msUntilAllowed(11_000)).to.equal(0);
    expect(c.endsAt()).to.equal(11_000);
    c.reset();
    expect(c.msUntilAllowed(1_001)).to.equal(0);
  });

  it('delay scope: waits elapse, or are all cancelled at once', async () => {
    const scope = new DelayScope();
    expect(await scope.wait(5)).to.equal(true);
    const pending = [scope.wait(60_000), scope.wait(60_000)];
    expect(scope.size).to.equal(2);
    scope.cancelAll();
    expect(await Promise.all(pending)).to.deep.equal([false, false]);
    expect(scope.size).to.equal(0);
  });

  it('reads bootstrap progress and severity from tor notice lines', () => {
    expect(parseBootstrapLogLine('Nov 22 05:33:55.000 [notice] Bootstrapped 5% (conn): Connecting to a relay')).to.deep.equal({
      progress: 5,
      tag: 'conn',
      summary: 'Connecting to a relay',
    });
    expect(parseBootstrapLogLine('Nov 22 05:33:59.000 [notice] Bootstrapped 100% (done): Done')?.progress).to.equal(100);
    expect(parseBootstrapLogLine('Nov 22 05:33:59.000 [notice] Bootstrapped 100%: Done')).to.deep.equal({ progress: 100, summary: 'Done' });
    expect(parseBootstrapLogLine('Nov 22 05:33:59.000 [notice] Opening Socks listener')).to.equal(undefined);
    expect(parseBootstrapLogLine('[notice] Bootstrapped 250%')).to.equal(undefined);
    expect(logLineSeverity('Nov 22 05:33:59.000 [warn] Problem bootstrapping')).to.equal('warn');
    expect(logLineSeverity('no severity')).to.equal(undefined);
  });
});
