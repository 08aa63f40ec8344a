import { expect } from 'chai';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ExitSteering, NextExitOptions } from '../../supervisor/exits/exit-assignments.js';
import { TorPoolInstance } from '../../supervisor/pool/tor-pool-instance.js';
import type { RotationTicket } from '../../supervisor/tor/instance-types.js';
import { quietLogger } from '../support/fakes/quiet-logger.js';

const PINNED = 'C'.repeat(40);

/**
 * A steered instance whose tor is never started: the test reads which target each rotation
 * asks tor for (a fingerprint to pin, or undefined: NEWNYM on tor's own choice of exit).
 */
function rig(dir: string): { instance: TorPoolInstance; targets: (string | undefined)[]; asked: NextExitOptions[] } {
  const asked: NextExitOptions[] = [];
  // Nothing qualifies: the session's country has no exit other than the one it is on.
  const steering: ExitSteering = {
    ensureCatalog: () => Promise.resolve(),
    next: (_id, options) => {
      asked.push(options);
      return { ok: false, note: 'no eligible exit: 8 in the catalog, 0 banned, 1 recently used avoided' };
    },
    current: () => PINNED,
    unreachable: () => undefined,
  };
  const instance = new TorPoolInstance({ index: 0, dataDir: dir, socksPort: 39980, controlPort: 39981, log: quietLogger() }, steering);
  const targets: (string | undefined)[] = [];
  Object.defineProperty(instance.tor, 'ready', { get: () => true });
  instance.tor.rotate = (target?: string): RotationTicket => {
    targets.push(target);
    return { id: targets.length, newnymSent: new Promise(() => undefined), done: new Promise(() => undefined) };
  };
  return { instance, targets, asked };
}

describe('a steered instance rotating when no new exit qualifies', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'exitpool-tpi-'));
  });
  afterEach(() => rm(dir, { recursive: true, force: true }));

  it('stays on its exit when the rotation must keep countries, instead of letting tor pick one anywhere', async () => {
    const { instance, targets, asked } = rig(dir);
    const plan = await instance.rotate({ why: 'session', countries: ['se'], avoid: ['127.22.0.1'] });
    expect(asked[0]?.countries).to.deep.equal(['se']);
    expect(plan).to.deep.equal({ exit: '', shortage: 'no eligible exit: 8 in the catalog, 0 banned, 1 recently used avoided' });
    expect(targets, 're-pinned to the exit it is assigned').to.deep.equal([PINNED]);
  });

  it('leaves the choice to tor (a new circuit anywhere) when no country was asked for', async () => {
    const { instance, targets } = rig(dir);
    await instance.rotate({ why: 'api' });
    expect(targets).to.deep.equal([undefined]);
  });
});
