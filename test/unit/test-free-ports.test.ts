import { expect } from 'chai';
import { setTimeout as sleep } from 'node:timers/promises';
import { PORTS_PER_INSTANCE } from '../../shared/config/limits.js';
import { freePorts, probePortsWith, servicePorts } from '../support/network/free-ports.js';

/**
 * The tests' port finder: two services started together (the fleet e2e's nodes) search at once.
 * A CI run failed with `HOP_PORT=11752: … already in use by another process`: a check made while
 * the other search's probe listener was closing can find a port free for both searches. So a
 * port, an instance block and a session port base are claimed before they are checked. Real
 * timing hits that window too rarely to test, so the checks here are a stand-in that waits and
 * says "free", as a real one does in the window; both tests fail when the claims come after.
 */
describe('the tests’ free-port finder', () => {
  const random = Math.random;
  let restoreProbe: () => void = () => undefined;
  beforeEach(() => {
    restoreProbe = probePortsWith(async () => {
      await sleep(2);
      return true;
    });
  });
  afterEach(() => {
    Math.random = random;
    restoreProbe();
  });
  /** Math.random gives `draws` in order, then random values. */
  const drawing = (draws: number[]): void => {
    let i = 0;
    Math.random = () => (i < draws.length ? (draws[i++] as number) : random());
  };

  it('never hands one port to two searches running at once, even when both draw it', async () => {
    // Both searches draw the same port first (an unusual one, so no earlier test had it), then others.
    drawing([0.612_345, 0.612_345, 0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 0.8, 0.9]);
    const [a, b] = await Promise.all([freePorts(2), freePorts(2)]);
    const all = [...(a ?? []), ...(b ?? [])];
    expect(new Set(all).size, all.join(' ')).to.equal(4);
  });

  it('hands services started together ports and instance blocks that do not overlap, even when they draw one block', async () => {
    // Eight listener ports (four each, drawn in turn), then both searches draw the same block.
    drawing([0.111, 0.122, 0.133, 0.144, 0.155, 0.166, 0.177, 0.188, 0.433_21, 0.433_21]);
    const services = await Promise.all([servicePorts(8), servicePorts(8)]);
    const listeners = services.flatMap((s) => [s.socks, s.http, s.api, s.hop]);
    expect(new Set(listeners).size).to.equal(listeners.length);
    const blocks = services.map((s) => s.instanceBase).sort((x, y) => x - y);
    expect((blocks[1] as number) - (blocks[0] as number), blocks.join(' ')).to.be.at.least(8 * PORTS_PER_INSTANCE);
  });
});
