import { expect } from 'chai';
import { InstanceDownSignal } from '../../workers/proxy/instance-down.js';

describe('proxy: instance-down signal', () => {
  it('calls the watchers of that instance once, and no others', () => {
    const signal = new InstanceDownSignal();
    const calls: string[] = [];
    signal.watch(1, () => calls.push('a'));
    signal.watch(1, () => calls.push('b'));
    signal.watch(2, () => calls.push('c'));
    signal.markDown(1);
    signal.markDown(1);
    expect(calls).to.deep.equal(['a', 'b']);
    expect(signal.size).to.equal(1);
  });

  it('forgets a watcher that stopped watching (its dial ended), leaving nothing behind', () => {
    const signal = new InstanceDownSignal();
    let called = false;
    const stop = signal.watch(3, () => (called = true));
    stop();
    stop();
    signal.markDown(3);
    expect(called).to.equal(false);
    expect(signal.size).to.equal(0);
  });
});
