/**
 * A node's hop keys: made at start, rotated every HOP_KEY_ROTATION_MS with the replaced key kept
 * for the overlap, paused while the node is not a member; its peers' keys read from Redis as
 * hostile text, tied to the process that published them.
 */
import { expect } from 'chai';
import fc from 'fast-check';
import { hopKeyObject, hopPassword, verifyHopPassword } from '../../shared/auth/hop-credential.js';
import { FleetHopKeys, HOP_KEY_ROTATION_MS } from '../../supervisor/fleet/fleet-hop-keys.js';
import { fuzzRuns } from '../support/fixtures/fuzz-runs.js';

const OVERLAP_MS = 10_000;
const PROCESS_B = 'node-b/4242/0b8c2f8e-6a8e-4f43-9f3e-2d3b0d2a1c11';

function keysAt(node: string, clock: { now: number }): FleetHopKeys {
  return new FleetHopKeys(node, OVERLAP_MS, () => clock.now);
}

describe('fleet hop keys', () => {
  it('rotates every HOP_KEY_ROTATION_MS, keeps the replaced key for the overlap, and pauses while not a member', () => {
    const clock = { now: 1_000 };
    const keys = keysAt('node-a', clock);
    const pushed: number[] = [];
    keys.onChange((s) => pushed.push(s.keys.length));
    const first = keys.snapshot().keys[0]?.id;
    clock.now += HOP_KEY_ROTATION_MS;
    keys.rotateIfDue(true);
    expect(keys.snapshot().keys.map((k) => k.id), 'paused: no new key').to.deep.equal([first]);
    keys.rotateIfDue(false);
    expect(keys.snapshot().keys).to.have.length(2);
    expect(keys.snapshot().keys[1]?.id).to.equal(first);
    clock.now += OVERLAP_MS;
    keys.rotateIfDue(false);
    expect(keys.snapshot().keys.map((k) => k.id), 'the replaced key goes after the overlap').to.not.include(first);
    expect(pushed).to.deep.equal([2, 1]);
    expect(keys.snapshot().version).to.be.above(1);
  });

  it('a peer signs with the owner’s published keys, only while the owner’s process is the one that published them', () => {
    const clock = { now: 5_000_000 };
    const owner = keysAt('node-b', clock);
    const forwarder = keysAt('node-a', clock);
    forwarder.learn(new Map([['node-b', owner.publication(PROCESS_B)]]), new Map([['node-b', PROCESS_B]]), true);
    expect(forwarder.canReach('node-b')).to.equal(true);
    const grant = forwarder.grant('node-b', 'crawl-1');
    const password = hopPassword(grant!, 'token:t1');
    const ownKeys = new Map(owner.snapshot().keys.map((k) => [k.id, hopKeyObject(k.secret)]));
    expect(verifyHopPassword(password, { node: 'node-b', sessionKey: 'crawl-1', keys: ownKeys, now: clock.now }).ok).to.equal(true);
    // node-b restarted (another process): its old keys are not used.
    forwarder.learn(new Map(), new Map([['node-b', 'node-b/4243/0b8c2f8e-6a8e-4f43-9f3e-2d3b0d2a1c12']]), false);
    expect(forwarder.canReach('node-b')).to.equal(false);
    expect(forwarder.grant('node-b', 'crawl-1')).to.equal(null);
    // Not a member: the keys known are kept; a member's complete reading drops a peer that publishes none.
    forwarder.learn(new Map(), new Map([['node-b', PROCESS_B]]), false);
    expect(forwarder.canReach('node-b')).to.equal(true);
    forwarder.learn(new Map(), new Map([['node-b', PROCESS_B]]), true);
    expect(forwarder.canReach('node-b')).to.equal(false);
    expect(forwarder.grant('node-c', 'crawl-1'), 'a node never heard of').to.equal(null);
  });

  it('keeps an awaited peer (known before an outage of Redis, not renewed since) reachable with its keys and process, and only while awaited', () => {
    const clock = { now: 5_000_000 };
    const owner = keysAt('node-b', clock);
    const forwarder = keysAt('node-a', clock);
    forwarder.learn(new Map([['node-b', owner.publication(PROCESS_B)]]), new Map([['node-b', PROCESS_B]]), true);
    // Redis back, node-b's records lapsed and not written again yet: a complete reading finds nothing.
    forwarder.learn(new Map(), new Map(), true, new Set(['node-b']));
    expect(forwarder.canReach('node-b'), 'awaited').to.equal(true);
    const password = hopPassword(forwarder.grant('node-b', 'crawl-1')!, 'token:t1');
    const ownKeys = new Map(owner.snapshot().keys.map((k) => [k.id, hopKeyObject(k.secret)]));
    expect(verifyHopPassword(password, { node: 'node-b', sessionKey: 'crawl-1', keys: ownKeys, now: clock.now }).ok).to.equal(true);
    // Another process renewed under its name meanwhile: its records win over the ones remembered.
    forwarder.learn(new Map(), new Map([['node-b', 'node-b/4243/0b8c2f8e-6a8e-4f43-9f3e-2d3b0d2a1c12']]), true, new Set(['node-b']));
    expect(forwarder.canReach('node-b'), 'another process').to.equal(false);
    // No longer awaited, still missing: gone.
    forwarder.learn(new Map([['node-b', owner.publication(PROCESS_B)]]), new Map([['node-b', PROCESS_B]]), true);
    forwarder.learn(new Map(), new Map(), true);
    expect(forwarder.canReach('node-b')).to.equal(false);
    // Awaited but never known: nothing to sign with.
    forwarder.learn(new Map(), new Map(), true, new Set(['node-c']));
    expect(forwarder.canReach('node-c')).to.equal(false);
  });

  it('leaves out a peer record that is not one (property): no grant from it', () => {
    const clock = { now: 1 };
    const forwarder = keysAt('node-a', clock);
    const good = keysAt('node-b', clock).publication(PROCESS_B);
    for (const bad of ['', PROCESS_B, `${PROCESS_B} x`, `${PROCESS_B} AAAAAAAAAAAA:short`, `not-a-process ${good.split(' ')[1]}`, `${good} ${good.split(' ')[1]} ${good.split(' ')[1]} ${good.split(' ')[1]} ${good.split(' ')[1]}`]) {
      forwarder.learn(new Map([['node-b', bad]]), new Map([['node-b', PROCESS_B]]), true);
      expect(forwarder.canReach('node-b'), JSON.stringify(bad)).to.equal(false);
    }
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 400 }), (text) => {
        forwarder.learn(new Map([['node-b', text]]), new Map([['node-b', PROCESS_B]]), true);
        if (forwarder.canReach('node-b')) expect(text.startsWith(`${PROCESS_B} `)).to.equal(true);
      }),
      { numRuns: fuzzRuns(500) },
    );
  });
});
