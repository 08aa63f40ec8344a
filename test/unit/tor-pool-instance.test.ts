import { expect } from 'chai';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ExitSteering, NextExitOptions } from '../../supervisor/exits/exit-assignments.js';
import { asPublished, type ExitRelay } from '../../supervisor/exits/exit-relay.js';
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
    egressPinned: () => Promise.resolve({ keep: true }),
    egressOf: () => undefined,
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

describe('a steered instance and the address its exit leaves from', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'exitpool-tpi-'));
  });
  afterEach(() => rm(dir, { recursive: true, force: true }));

  const relay = (c: string): ExitRelay => asPublished({ fingerprint: c.repeat(40), nickname: `n${c}`, address: `10.0.0.${c.charCodeAt(0) % 200}`, country: 'de', bandwidth: 1, block: '10.0.0.0/24', family: c.repeat(40) });

  it('serves only once its exit’s egress is measured, and chooses again (before serving) when it clashes', async () => {
    const asked: NextExitOptions[] = [];
    const measured: { fingerprint: string; settling: boolean }[] = [];
    const answers = [{ keep: false }, { keep: true }];
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const choices = [relay('A'), relay('B')];
    const pinned: (string | undefined)[] = [];
    const steering: ExitSteering = {
      ensureCatalog: () => Promise.resolve(),
      next: (_id, options) => {
        asked.push(options);
        const next = choices.shift();
        return next ? { ok: true, relay: next, distinct: true, note: '' } : { ok: false, note: 'none' };
      },
      // The steering records each choice as the instance's assignment, as ExitAssignments does.
      current: () => pinned.at(-1),
      unreachable: () => undefined,
      egressPinned: async (_id, fingerprint, socks, settling) => {
        expect(socks).to.deep.include({ host: '127.0.0.1', port: 39980 });
        measured.push({ fingerprint, settling });
        await gate;
        return answers.shift() ?? { keep: true };
      },
      egressOf: () => undefined,
    };
    const instance = new TorPoolInstance({ index: 0, dataDir: dir, socksPort: 39980, controlPort: 39981, log: quietLogger() }, steering);
    Object.defineProperty(instance.tor, 'ready', { get: () => true });
    // tor names the exit it is pinned to, as it does once a pin is in force.
    Object.defineProperty(instance.tor, 'exit', { get: () => ({ exitIp: '', exitCountry: '', exitNickname: '', exitFingerprint: '', exitConfirmed: false, retiredExitIp: '', pinnedExit: pinned.at(-1) ?? '', rotating: false }) });
    instance.tor.rotate = (target?: string): RotationTicket => {
      pinned.push(target);
      return { id: pinned.length, newnymSent: new Promise(() => undefined), done: Promise.resolve({ ok: true, exit: instance.tor.exit }) };
    };
    const ready = new Promise<void>((resolve) => instance.once('ready', () => resolve()));
    let isReady = false;
    void ready.then(() => (isReady = true));
    instance.tor.emit('ready');
    await new Promise((r) => setTimeout(r, 20));
    expect(isReady, 'not ready while the egress is being measured').to.equal(false);
    expect(measured).to.deep.equal([{ fingerprint: 'A'.repeat(40), settling: true }]);
    release();
    await ready;
    expect(pinned).to.deep.equal(['A'.repeat(40), 'B'.repeat(40)]);
    expect(measured.map((m) => m.fingerprint)).to.deep.equal(['A'.repeat(40), 'B'.repeat(40)]);
    expect(asked.map((o) => [o.fresh, o.why])).to.deep.equal([
      [false, 'bootstrap'],
      [true, 'egress'],
    ]);
  });

  it('names the measured address and its country as the exit IP; exit_confirmed stays tor’s', () => {
    const steering: ExitSteering = {
      ensureCatalog: () => Promise.resolve(),
      next: () => ({ ok: false, note: 'none' }),
      current: () => undefined,
      unreachable: () => undefined,
      egressPinned: () => Promise.resolve({ keep: true }),
      egressOf: (fp) => (fp === 'D'.repeat(40) ? { address: '10.9.0.4', country: 'us' } : undefined),
    };
    const instance = new TorPoolInstance({ index: 0, dataDir: dir, socksPort: 39980, controlPort: 39981, log: quietLogger() }, steering);
    const tor = { exitIp: '10.2.0.1', exitCountry: 'jp', exitNickname: 'nD', exitFingerprint: 'D'.repeat(40), exitConfirmed: true, retiredExitIp: '', pinnedExit: 'D'.repeat(40), rotating: false };
    Object.defineProperty(instance.tor, 'exit', { get: () => tor });
    expect(instance.exit()).to.deep.equal({ ...tor, exitIp: '10.9.0.4', exitCountry: 'us' });
    tor.exitFingerprint = 'E'.repeat(40);
    expect(instance.exit(), 'an exit never measured keeps tor’s published address').to.equal(tor);
  });
});
