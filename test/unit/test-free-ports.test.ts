import { expect } from 'chai';
import { PORTS_PER_INSTANCE } from '../../shared/config/limits.js';
import { freePorts, servicePorts } from '../support/network/free-ports.js';

/**
 * The tests' port finder: two services started together (the fleet e2e's nodes) search at once.
 * A CI run failed with `HOP_PORT=11752: … already in use by another process`; the likeliest
 * cause is two searches handed one port (between one search's probe listener closing and its
 * claim, the other could probe the same port), so a port is now claimed before it is probed.
 * These check the contract; the window itself is too narrow to hit on purpose.
 */
describe('the tests’ free-port finder', () => {
  const random = Math.random;
  afterEach(() => {
    Math.random = random;
  });

  it('never hands one port to two searches running at once, even when both draw it first', async () => {
    // Both searches draw the same port first (an unusual one, so no earlier test had it), then others.
    const draws = [0.612_345, 0.612_345, 0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 0.8, 0.9];
    let i = 0;
    Math.random = () => (i < draws.length ? (draws[i++] as number) : random());
    const [a, b] = await Promise.all([freePorts(2), freePorts(2)]);
    const all = [...(a ?? []), ...(b ?? [])];
    expect(new Set(all).size, all.join(' ')).to.equal(4);
  });

  it('hands services started together ports and instance blocks that do not overlap', async () => {
    const services = await Promise.all(Array.from({ length: 4 }, () => servicePorts(8)));
    const listeners = services.flatMap((s) => [s.socks, s.http, s.api, s.hop]);
    expect(new Set(listeners).size).to.equal(listeners.length);
    const blocks = services.map((s) => s.instanceBase).sort((x, y) => x - y);
    for (let k = 1; k < blocks.length; k++) expect((blocks[k] as number) - (blocks[k - 1] as number), blocks.join(' ')).to.be.at.least(8 * PORTS_PER_INSTANCE);
  });
});
