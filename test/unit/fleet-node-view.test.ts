import { expect } from 'chai';
import fc from 'fast-check';
import { fuzzRuns } from '../support/fixtures/fuzz-runs.js';
import { readFleetNodeView } from '../../supervisor/fleet/fleet-node-view.js';

const instance = { id: 0, ready: true, state: 'healthy', exit_ip: '127.20.0.1', exit_country: 'de', exit_fingerprint: 'A'.repeat(40), exit_shortage: '', sessions: 3, requests: 10 };
const view = { node: 'node-a', updated_at: '2026-11-25T08:00:00.000Z', routable: 1, sessions: 3, instances: [instance] };

describe('fleet: a node’s summary read back from Redis (hostile input)', () => {
  it('reads a summary a node wrote', () => {
    expect(readFleetNodeView('node-a', JSON.stringify(view))).to.deep.equal(view);
  });

  it('reads a shortage a node reports, and a summary from a node that reports none yet as no shortage', () => {
    const short = { ...view, instances: [{ ...instance, exit_shortage: "every eligible exit shares its /24 with another instance's (on this node or another of the fleet)" }] };
    expect(readFleetNodeView('node-a', JSON.stringify(short))).to.deep.equal(short);
    const { exit_shortage: _, ...older } = instance;
    expect(readFleetNodeView('node-a', JSON.stringify({ ...view, instances: [older] }))?.instances[0]?.exit_shortage).to.equal('');
  });

  for (const [name, text] of [
    ['not JSON', 'nope'],
    ['another node’s summary under this key', JSON.stringify({ ...view, node: 'node-b' })],
    ['a list instead of an object', '[]'],
    ['a count out of bounds', JSON.stringify({ ...view, routable: -1 })],
    ['too many instances', JSON.stringify({ ...view, instances: Array.from({ length: 1000 }, () => instance) })],
    ['an instance of the wrong type', JSON.stringify({ ...view, instances: ['x'] })],
    ['an instance field of the wrong type', JSON.stringify({ ...view, instances: [{ ...instance, ready: 'yes' }] })],
    ['an overlong field', JSON.stringify({ ...view, instances: [{ ...instance, state: 'x'.repeat(1000) }] })],
    ['an overlong shortage', JSON.stringify({ ...view, instances: [{ ...instance, exit_shortage: 'x'.repeat(1000) }] })],
    ['a shortage that is not text', JSON.stringify({ ...view, instances: [{ ...instance, exit_shortage: 3 }] })],
    ['a time that is not one', JSON.stringify({ ...view, updated_at: 'soon' })],
  ] as const) {
    it(`leaves out ${name}`, () => {
      expect(readFleetNodeView('node-a', text)).to.equal(null);
    });
  }

  it('property: any text is either a checked summary or left out, never an exception', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.json(), fc.constant(JSON.stringify(view))), (text) => {
        const read = readFleetNodeView('node-a', text);
        if (read !== null) {
          expect(read.node).to.equal('node-a');
          expect(read.instances.every((i) => typeof i.ready === 'boolean' && Number.isInteger(i.id))).to.equal(true);
        }
      }),
      { numRuns: fuzzRuns(500) },
    );
  });
});
