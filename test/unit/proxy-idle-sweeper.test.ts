import { expect } from 'chai';
import { IDLE_SWEEPS_PER_TIMEOUT, IdleSweeper, MAX_IDLE_SWEEP_INTERVAL_MS, idleSweeperFor, type IdleWatched } from '../../workers/proxy/idle-sweeper.js';

class Relay implements IdleWatched {
  bytes = 0;
  expired = 0;
  activity(): number {
    return this.bytes;
  }
  expire(): void {
    this.expired += 1;
  }
}

describe('proxy: idle sweeper', () => {
  it('expires a relay whose counters did not move for the idle timeout, once, and spares a busy one', () => {
    let now = 0;
    const sweeper = new IdleSweeper(1000, () => now, false);
    const idle = new Relay();
    const busy = new Relay();
    sweeper.watch(idle);
    sweeper.watch(busy);
    for (let t = 250; t <= 3000; t += 250) {
      now = t;
      busy.bytes += 1;
      sweeper.sweep();
      if (t < 1000) expect(idle.expired, `at ${t} ms`).to.equal(0);
    }
    expect(idle.expired).to.equal(1);
    expect(busy.expired).to.equal(0);
    expect(sweeper.size).to.equal(1);
  });

  it('counts idleness from the last movement seen, not from when watching began', () => {
    let now = 0;
    const sweeper = new IdleSweeper(1000, () => now, false);
    const relay = new Relay();
    sweeper.watch(relay);
    now = 900;
    relay.bytes = 5;
    sweeper.sweep();
    now = 1800;
    sweeper.sweep();
    expect(relay.expired, '900 ms after the last byte').to.equal(0);
    now = 1900;
    sweeper.sweep();
    expect(relay.expired).to.equal(1);
  });

  it('runs its interval only while something is watched, and sizes it from the timeout', () => {
    const sweeper = new IdleSweeper(400);
    expect(sweeper.intervalMs).to.equal(400 / IDLE_SWEEPS_PER_TIMEOUT);
    expect(new IdleSweeper(3_600_000).intervalMs).to.equal(MAX_IDLE_SWEEP_INTERVAL_MS);
    const a = new Relay();
    const b = new Relay();
    expect(sweeper.running).to.equal(false);
    sweeper.watch(a);
    sweeper.watch(b);
    expect(sweeper.running).to.equal(true);
    sweeper.unwatch(a);
    expect(sweeper.running).to.equal(true);
    sweeper.unwatch(b);
    expect(sweeper.running, 'no timer left behind').to.equal(false);
  });

  it('gives every listener of a process the same sweeper per timeout', () => {
    expect(idleSweeperFor(12_345)).to.equal(idleSweeperFor(12_345));
    expect(idleSweeperFor(12_345)).to.not.equal(idleSweeperFor(54_321));
  });
});
