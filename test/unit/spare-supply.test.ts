import { expect } from 'chai';
import { resolveSessionKey } from '../../shared/api/session-key.js';
import { loadConfig, ConfigError } from '../../shared/config/index.js';
import type { RouteResult } from '../../shared/ipc/protocol.js';
import { ExitpoolError } from '../../shared/errors/catalogue.js';
import { AuditLog } from '../../supervisor/audit/audit-log.js';
import { ExitAssignments } from '../../supervisor/exits/exit-assignments.js';
import { addressBlock, asPublished, type ExitRelay } from '../../supervisor/exits/exit-relay.js';
import { fakePool, type FakePool } from '../support/fakes/pool-parts.js';
import { quietLogger } from '../support/fakes/quiet-logger.js';

const fp = (c: string): string => c.repeat(40).toUpperCase();
function relay(c: string, address: string, country = 'de'): ExitRelay {
  return asPublished({ fingerprint: fp(c), nickname: `n${c}`, address, country, bandwidth: 1000, block: addressBlock(address), family: fp(c) });
}
/** The private network's shape: 8 exits in 7 /24s (g and h share one). */
const TESTNET_LIKE = ['a', 'b', 'c', 'd', 'e', 'f', 'g'].map((c, i) => relay(c, `10.0.${i + 1}.1`)).concat(relay('h', '10.0.7.2'));

const socks = (key: string) => ({ key: resolveSessionKey(key, '10.1.1.1', 'ip'), named: true, listener: 'socks' as const });
function routed(r: RouteResult | Promise<RouteResult>): number {
  if (r instanceof Promise || !r.ok) throw new Error('refused');
  return r.instance;
}
const settle = (): Promise<void> => new Promise((r) => setImmediate(r));

interface SpareRig extends FakePool {
  exits: ExitAssignments;
}

/** A pool of fakes with exits assigned from `relays` (each instance steered by them), 4 + 2 spares unless `env` says otherwise. */
function spareRig(env: Record<string, string> = {}, relays: ExitRelay[] = TESTNET_LIKE): SpareRig {
  const exits = new ExitAssignments({ unit: 'subnet', banTtlMs: 60_000, exitNodes: [], strictNodes: false, audit: new AuditLog(), log: quietLogger(), random: () => 0.5 });
  exits.catalog.replace(relays, 1);
  return { ...fakePool({ POOL_SIZE: '4', WARM_SPARES: '2', ...env }, { exits, steerInstances: true }), exits };
}

/** Every session's instance and exit, but `except`'s. */
function othersNow(r: FakePool, except: string): Map<string, string> {
  return new Map(
    r.pool
      .sessionViews()
      .filter((s) => s.key !== except)
      .map((s) => [s.key, `${s.instance} ${s.exit_ip}`]),
  );
}

describe('spares (WARM_SPARES): supply for rotations in a busy pool', () => {
  it('starts WARM_SPARES instances beyond POOL_SIZE, counted apart in the summary and flagged in the instance view', () => {
    const { pool } = spareRig();
    expect(pool.instanceIds()).to.deep.equal([0, 1, 2, 3, 4, 5]);
    const s = pool.summary();
    expect(s).to.include({ size: 4, ready: 4, routable: 4 });
    expect(s.spares).to.deep.equal({ size: 2, ready: 2, warm: 2, in_use: 0 });
    expect(s.config).to.include({ pool_size: 4, warm_spares: 2 });
    expect(pool.instanceViews().map((i) => i.spare)).to.deep.equal([false, false, false, false, true, true]);
    // Every instance, spares included, on an exit in a /24 of its own.
    const blocks = pool.instanceViews().map((i) => addressBlock(i.exit_ip));
    expect(new Set(blocks).size).to.equal(6);
  });

  it('starts none without exit assignments (PIN_EXIT_RELAY off): a spare could not be kept on an exit of its own', () => {
    const { pool } = fakePool({ WARM_SPARES: '2' });
    expect(pool.instanceIds()).to.deep.equal([0, 1, 2, 3]);
    expect(pool.summary().spares).to.deep.equal({ size: 0, ready: 0, warm: 0, in_use: 0 });
    expect(pool.summary().config).to.include({ warm_spares: 0 });
  });

  it('places no new session on a spare, nor moves one there for the pool’s own reasons (quarantine, drain, rebalance)', async () => {
    const { pool } = spareRig();
    for (let i = 0; i < 40; i++) expect(routed(pool.route(socks(`k${i}`), 0))).to.be.below(4);
    await pool.instanceAction(0, 'quarantine');
    await pool.instanceAction(1, 'drain');
    for (const s of pool.sessionViews()) expect([2, 3], s.key).to.include(s.instance);
    await pool.instanceAction(0, 'release');
    await pool.instanceAction(1, 'release');
    pool.tick();
    for (const s of pool.sessionViews()) expect(s.instance, s.key).to.be.below(4);
    expect(pool.summary().spares.in_use).to.equal(0);
  });

  it('lets the spares stand in when none of the pool’s instances is routable', async () => {
    const { pool } = spareRig({ POOL_SIZE: '1', WARM_SPARES: '1' });
    await pool.instanceAction(0, 'quarantine');
    expect(pool.summary().routable).to.equal(0);
    expect(routed(pool.route(socks('k'), 0))).to.equal(1);
  });

  it('in a busy pool, gives one session 24 rotations in a row each an exit outside the /24s of its last five, and nobody else’s exit changes', async () => {
    const r = spareRig();
    const { pool, audit } = r;
    for (let i = 0; i < 8; i++) pool.route(socks(`resident-${i}`), 0);
    pool.route(socks('rotator'), 0);
    for (const s of pool.sessionViews()) expect(s.instance, 'every session on the pool’s instances').to.be.below(4);
    for (let id = 0; id < 4; id++) expect(pool.instanceView(id).sessions, `instance ${id} carries sessions`).to.be.at.least(2);
    const residents = othersNow(r, 'rotator');
    const history = [pool.sessionView('rotator').exit_ip];
    for (let i = 0; i < 24; i++) {
      const res = await pool.rotateSession('rotator', false);
      expect(res.new_exit, `rotation ${i}: ${res.exit_note}`).to.equal(true);
      const ip = pool.sessionView('rotator').exit_ip;
      expect(ip, `rotation ${i}`).to.not.equal('');
      expect(history.slice(-5).map(addressBlock), `rotation ${i}: ${ip} after ${history.slice(-5).join(' ')}`).to.not.include(addressBlock(ip));
      history.push(ip);
      expect(othersNow(r, 'rotator'), `rotation ${i}: every other session where it was`).to.deep.equal(residents);
      await settle();
    }
    const paths = audit.recent(500).filter((e) => e.type === 'rotate' && e.session === 'rotator' && 'supply' in e.details).map((e) => e.details.supply as string);
    expect(paths, 'the spares were drawn on').to.include.oneOf(['spare', 'spare_assigned']);
    expect(paths).to.not.include('none');
  });

  it('takes an instance of the pool on a fresh exit before a warm spare, keeping the spare for a session that needs it', async () => {
    const { pool } = spareRig();
    pool.route(socks('k'), 0);
    const res = await pool.rotateSession('k', false);
    expect(res.new_exit).to.equal(true);
    expect(res.instance).to.be.below(4);
    expect(pool.summary().spares.warm).to.equal(2);
  });

  it('gives a spare its rotated sessions left a new exit at once, away from the leaver’s exits', async () => {
    // Enough /24s that an exit outside the leaver's exits is always left for the spare.
    const r = spareRig({}, Array.from({ length: 12 }, (_, i) => relay(String.fromCharCode(97 + i), `10.0.${i + 1}.1`)));
    const { pool, instances } = r;
    for (let i = 0; i < 8; i++) pool.route(socks(`resident-${i}`), 0);
    pool.route(socks('rotator'), 0);
    // Rotate until the rotator sits on a spare, then once more: the spare it leaves is recycled.
    let on = pool.sessionView('rotator').instance;
    for (let i = 0; i < 10 && on < 4; i++) {
      await pool.rotateSession('rotator', false);
      await settle();
      on = pool.sessionView('rotator').instance;
    }
    expect(on, 'the rotator reached a spare').to.be.at.least(4);
    const spare = instances.get(on)!;
    const before = spare.rotationRequests.length;
    await pool.rotateSession('rotator', false);
    const recycle = spare.rotationRequests.slice(before).find((q) => q.why === 'spare');
    expect(recycle, 'the spare left empty is given a new exit').to.not.equal(undefined);
    expect(recycle?.avoid).to.deep.equal(pool.sessionView('rotator').recent_exits);
    await settle();
    const now = pool.instanceView(on).exit_ip;
    expect(pool.sessionView('rotator').recent_exits.map(addressBlock)).to.not.include(addressBlock(now));
    expect(pool.instanceView(on).rotating).to.equal(false);
    expect(pool.summary().spares.warm).to.be.at.least(1);
  });

  it('waits for a spare on its way to an exit new to the session (a recycle aimed at it) rather than settle for less', async () => {
    // 4 /24s, 3 instances: the one free /24 is where the recycled spare goes.
    const relays = ['a', 'b', 'c', 'd'].map((c, i) => relay(c, `10.0.${i + 1}.1`));
    const r = spareRig({ POOL_SIZE: '1', WARM_SPARES: '2' }, relays);
    const { pool, instances, audit } = r;
    const free = relays.find((x) => !pool.instanceViews().some((i) => i.exit_ip === x.address))?.address;
    for (let i = 0; i < 2; i++) pool.route(socks(`resident-${i}`), 0);
    pool.route(socks('k'), 0);
    const first = await pool.rotateSession('k', false);
    await settle();
    const second = await pool.rotateSession('k', false);
    expect([first.instance, second.instance].sort()).to.deep.equal([1, 2]);
    // The spare just left is on its way to the free /24; the next rotation comes before it is there.
    expect(instances.get(first.instance)!.isRotating).to.equal(true);
    const third = await pool.rotateSession('k', false);
    expect(third, third.exit_note).to.deep.include({ new_exit: true, instance: first.instance, exit_ip: free });
    const last = audit.recent(50).find((e) => e.type === 'rotate' && e.session === 'k' && 'supply' in e.details);
    expect(last?.details.supply).to.equal('spare');
  });

  it('rotates a session alone on its instance in place when no instance has a fresh exit, keeping it there', async () => {
    // One exit per /24, as many as instances and one more: the free one is where the session goes.
    const relays = ['a', 'b', 'c'].map((c, i) => relay(c, `10.0.${i + 1}.1`));
    const r = spareRig({ POOL_SIZE: '2', WARM_SPARES: '0', EXIT_HISTORY: '5' }, relays);
    const { pool } = r;
    const unused = relays.find((x) => !pool.instanceViews().some((i) => i.exit_ip === x.address));
    const at = routed(pool.route(socks('k'), 0));
    // The other instance carries a session: moving there would not be a fresh exit after one visit.
    const other = pool.instanceIds().find((id) => id !== at) as number;
    const first = await pool.rotateSession('k', false);
    expect(first.instance).to.equal(other);
    await settle();
    pool.route(socks('neighbour'), 0);
    expect(pool.sessionView('neighbour').instance).to.equal(at);
    const neighbour = pool.sessionView('neighbour').exit_ip;
    const second = await pool.rotateSession('k', false);
    expect(second, second.exit_note).to.deep.include({ new_exit: true, instance: other });
    expect(pool.sessionView('neighbour').exit_ip).to.equal(neighbour);
    expect(pool.sessionView('k').exit_ip, 'the one exit no instance had').to.equal(unused?.address);
  });

  it('says so (new_exit false) when the catalog has no exit left that is new to the session', async () => {
    // 3 /24s for 3 instances: no exit is left to give anyone.
    const relays = ['a', 'b', 'c'].map((c, i) => relay(c, `10.0.${i + 1}.1`));
    const r = spareRig({ POOL_SIZE: '2', WARM_SPARES: '1' }, relays);
    const { pool, audit } = r;
    for (let i = 0; i < 4; i++) pool.route(socks(`resident-${i}`), 0);
    pool.route(socks('k'), 0);
    const results = [];
    for (let i = 0; i < 3; i++) {
      results.push(await pool.rotateSession('k', false));
      await settle();
    }
    // Another instance of the pool, then the spare, then nothing new is left.
    expect(results.map((x) => x.new_exit)).to.deep.equal([true, true, false]);
    expect(results[2]?.exit_note).to.match(/last 5 exits/);
    expect(audit.recent(200).some((e) => e.type === 'rotate' && e.details.supply === 'none')).to.equal(true);
  });

  it('says so (new_exit false) when the supply is spent: the spare taken, no idle instance, and the session not alone', async () => {
    // 5 /24s for 3 instances: two exits are free, but no instance without sessions is left to take one.
    const relays = ['a', 'b', 'c', 'd', 'e'].map((c, i) => relay(c, `10.0.${i + 1}.1`));
    const r = spareRig({ POOL_SIZE: '2', WARM_SPARES: '1' }, relays);
    const { pool } = r;
    for (let i = 0; i < 4; i++) pool.route(socks(`resident-${i}`), 0);
    const exitOf = (id: number): string => pool.instanceView(id).exit_ip;
    // k2 has been through both instances of the pool: only the spare is new to it.
    pool.route(socks('k2'), 0);
    pool.sessions.get('k2')!.recentExits = [exitOf(0), exitOf(1)];
    expect((await pool.rotateSession('k2', false)).instance).to.equal(2);
    // k shares an instance with residents, and every instance's exit is in its history.
    pool.route(socks('k'), 0);
    const at = pool.sessionView('k').instance;
    pool.sessions.get('k')!.recentExits = [exitOf(at === 0 ? 1 : 0), exitOf(2)];
    const before = othersNow(r, 'k');
    const res = await pool.rotateSession('k', false);
    expect(res.new_exit).to.equal(false);
    expect(res.exit_note).to.match(/may repeat an exit/);
    expect(othersNow(r, 'k'), 'nobody else moved or changed exit').to.deep.equal(before);
    expect(pool.summary().spares).to.include({ warm: 0, in_use: 1 });
  });

  it('moves a reporting session to a spare when nothing else is fresh for it, and never rotates a shared instance for it', async () => {
    const r = spareRig({ POOL_SIZE: '2', WARM_SPARES: '1' }, ['a', 'b', 'c', 'd'].map((c, i) => relay(c, `10.0.${i + 1}.1`)));
    const { pool, instances } = r;
    for (let i = 0; i < 4; i++) pool.route(socks(`resident-${i}`), 0);
    const at = pool.sessionView('resident-0').instance;
    const other = at === 0 ? 1 : 0;
    // The other instance's exit is already in its history: only the spare is new.
    pool.sessions.get('resident-0')!.recentExits = [instances.get(other)!.exitInfo.exitIp];
    const outcome = await pool.reportFailure('resident-0', 'captcha', 'test', { kind: 'token', id: 't' });
    expect(outcome.moved).to.equal(true);
    expect(outcome.new_exit).to.equal(true);
    expect(pool.sessionView('resident-0').instance).to.equal(2);
  });

  it('resizes the pool only: the spares stay, keep their indexes and leave room within MAX_POOL_SIZE', async () => {
    const { pool } = spareRig();
    const down = pool.resize(2);
    expect(down).to.deep.include({ size: 2, previous: 4, adding: [], removing: [2, 3] });
    await settle();
    expect(pool.instanceIds()).to.deep.equal([0, 1, 4, 5]);
    const up = pool.resize(4);
    expect(up.adding).to.deep.equal([2, 3]);
    expect(pool.summary()).to.include({ size: 4 });
    expect(pool.summary().spares.size).to.equal(2);
    expect(() => pool.resize(63)).to.throw(ExitpoolError, /from 1 to 62/);
  });

  it('refuses a configuration whose pool and spares would not fit in MAX_POOL_SIZE indexes', () => {
    expect(() => loadConfig({ POOL_SIZE: '60', WARM_SPARES: '5' })).to.throw(ConfigError, /WARM_SPARES/);
    expect(loadConfig({ POOL_SIZE: '60', WARM_SPARES: '4' }).warmSpares).to.equal(4);
    expect(() => loadConfig({ WARM_SPARES: '9' })).to.throw(ConfigError);
    expect(() => loadConfig({ WARM_SPARES: '-1' })).to.throw(ConfigError);
  });
});
