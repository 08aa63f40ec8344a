import { expect } from 'chai';
import type { RouteParams, RouteResult } from '../../shared/ipc/protocol.js';
import { resolveSessionKey } from '../../shared/api/session-key.js';
import type { DefaultSessionMode } from '../../shared/config/index.js';
import { SessionTable } from '../../supervisor/sessions/session-table.js';
import { fakeExit, fakePool, type FakePool } from '../support/fakes/pool-parts.js';
import { ExitpoolError } from '../../shared/errors/catalogue.js';
import { COUNTRY_EXIT_WAIT_MS } from '../../shared/config/limits.js';
import type { ExitAssignments } from '../../supervisor/exits/exit-assignments.js';
import { PoolMetrics } from '../../supervisor/metrics/pool-metrics.js';

const rig = (env: Record<string, string> = {}, readyAll = true): FakePool => fakePool(env, { readyAll });

function routed(r: RouteResult): number {
  if (!r.ok) throw new Error(`refused: ${r.reason}`);
  return r.instance;
}

/** A SOCKS connection's route request as a worker sends it: the key it named, else the one DEFAULT_SESSION gives. */
const socks = (key: string | null, clientIp = '10.1.1.1', defaultSession: DefaultSessionMode = 'ip') => ({ key: resolveSessionKey(key, clientIp, defaultSession), named: key !== null, listener: 'socks' as const });

/** The catalogue code a pool call is refused with (it throws ExitpoolError), or 'accepted'. */
async function refusalOf(call: Promise<unknown> | (() => Promise<unknown>)): Promise<string> {
  try {
    await (typeof call === 'function' ? call() : call);
    return 'accepted';
  } catch (e) {
    if (e instanceof ExitpoolError) return e.code;
    throw e;
  }
}

describe('pool', () => {
  it('spawns the configured instances and reports them', () => {
    const { pool } = rig();
    expect(pool.instanceIds()).to.deep.equal([0, 1, 2, 3]);
    const s = pool.views.summary();
    expect(s).to.include({ size: 4, ready: 4, routable: 4, sessions: 0, socks_port: 9250, http_port: 9251 });
    expect(s.config).to.include({ pool_size: 4, session_ttl: '10m0s', default_session: 'ip' });
    expect(s.version).to.match(/^\d+\.\d+\.\d+$/);
  });

  it('routes the same key to the same instance and spreads keys', () => {
    const { pool } = rig();
    const first = routed(pool.route(socks('alice'), 0));
    for (let i = 0; i < 20; i++) expect(routed(pool.route(socks('alice'), 0))).to.equal(first);
    const used = new Set<number>();
    for (let i = 0; i < 8; i++) used.add(routed(pool.route(socks(`k${i}`), 0)));
    expect(used.size).to.equal(4);
  });

  it('routes callers that name no session by the key the worker gave them (DEFAULT_SESSION), and a null key anywhere', () => {
    const ip = rig({ DEFAULT_SESSION: 'ip' }).pool;
    const a = routed(ip.route(socks(null, '10.0.0.1'), 0));
    expect(routed(ip.route(socks(null, '10.0.0.1'), 0))).to.equal(a);
    expect(ip.views.sessionView('ip:10.0.0.1').key).to.equal('ip:10.0.0.1');

    const shared = rig({ DEFAULT_SESSION: 'shared' }).pool;
    const s = routed(shared.route(socks(null, '10.0.0.1', 'shared'), 0));
    expect(routed(shared.route(socks(null, '10.0.0.2', 'shared'), 0))).to.equal(s);

    const random = rig({ DEFAULT_SESSION: 'random' }).pool;
    const seen = new Set<number>();
    for (let i = 0; i < 60; i++) seen.add(routed(random.route(socks(null, '10.1.1.1', 'random'), 0)));
    expect(seen.size).to.be.greaterThan(1);
    expect(random.views.summary().sessions).to.equal(0);
  });

  it('refuses at once when nothing is routable', () => {
    const { pool } = rig({}, false);
    expect(pool.route(socks('k'), 0)).to.deep.equal({ ok: false, reason: 'no_routable_instance' });
  });

  it('never routes to an instance mid-rotation, including sessions that arrive during it', async () => {
    const { pool, instances } = rig();
    const first = routed(pool.route(socks('k'), 0));
    expect((await pool.instanceAction(first, 'rotate')).id).to.equal(first);
    expect(instances.get(first)!.rotations).to.equal(1);
    expect(pool.views.sessionView('k').instance).to.not.equal(first);
    for (let i = 0; i < 20; i++) expect(routed(pool.route(socks(`new${i}`), 0))).to.not.equal(first);
  });

  it('refuses to rotate an instance that has not bootstrapped (409)', async () => {
    const { pool, instances } = rig({}, false);
    instances.get(0)!.setReady(false);
    expect(await refusalOf(pool.instanceAction(0, 'rotate'))).to.equal('EXITPOOL_NOT_BOOTSTRAPPED');
    expect(await refusalOf(pool.instanceAction(99, 'rotate'))).to.equal('EXITPOOL_NO_SUCH_INSTANCE');
  });

  it('counts accounting exactly and feeds health', () => {
    const { pool, health } = rig();
    const inst = routed(pool.route(socks('k'), 3));
    pool.recordCloses(
      [
        { key: 'k', session: pool.sessions.get('k')?.id ?? null, instance: inst, bytesUp: 10, bytesDown: 20, ok: true, latencyMs: 100, endedAt: 0, host: 'example.test', credential: 'token:t' },
        { key: 'k', session: pool.sessions.get('k')?.id ?? null, instance: inst, bytesUp: 1, bytesDown: 0, ok: false, failure: { kind: 'dial', scored: false }, latencyMs: null, endedAt: 0, host: 'example.test', credential: 'token:t' },
      ],
      3,
    );
    const s = pool.views.summary();
    expect(s.totals).to.deep.equal({ requests: 2, failures: 1, bytes_up: 11, bytes_down: 20 });
    const h = health.get(inst)!;
    // A session's success reaches health after SUCCESS_REPORT_GRACE_MS (it ended long ago here).
    expect(h.successes).to.equal(0);
    pool.tick();
    expect(h.successes).to.equal(1);
    expect(h.failures).to.deep.equal([{ kind: 'transport', source: 'transport', scored: false, mayQuarantine: true }]);
  });

  it('scores client reports within the credential budget only; beyond it they are counted and audited; every one moves the session', async () => {
    const { pool, health, audit } = rig({ CLIENT_REPORT_BUDGET: '2/1m' });
    routed(pool.route(socks('k'), 1));
    const token = { kind: 'token', id: 'scraper' } as const;
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push(await pool.reportFailure('k', 'captcha', '', token));
    expect(answers.map((a) => a.scored)).to.deep.equal([true, true, false]);
    expect(answers.map((a) => a.moved), 'within its budget or not, the reporter’s session leaves').to.deep.equal([true, true, true]);
    const charged = [...health.values()].flatMap((h) => h.failures.filter((f) => f.source === 'client').map((f) => f.scored));
    expect(charged.sort()).to.deep.equal([false, true, true]);
    const reports = audit.recent(20).filter((e) => e.message.startsWith('failure reported'));
    expect(reports).to.have.length(3);
    expect(reports[0]!.details).to.include({ scored: false, reporter: 'token:scraper' });
    // Another credential has a budget of its own.
    const other = await pool.reportFailure('k', 'captcha', '', { kind: 'sign-in', user: 'admin' });
    expect(other.scored).to.equal(true);
  });

  it('never lets client evidence quarantine below MIN_ROUTABLE; the instance’s own dial failures still may', async () => {
    const { pool, health } = rig({ MIN_ROUTABLE: '2' });
    for (const h of health.values()) h.state = 'healthy';
    const inst = routed(pool.route(socks('k0'), 1));
    // A new key on `inst` for each report: a report moves its own session off the instance.
    let n = 1;
    const onInst = (): string => {
      for (;;) {
        const key = `k${n++}`;
        if (routed(pool.route(socks(key), 1)) === inst) return key;
      }
    };
    const others = [...health.keys()].filter((id) => id !== inst);
    // 4 routable, floor 2: a client report may quarantine.
    await pool.reportFailure(onInst(), 'captcha', '', { kind: 'token', id: 't' });
    expect(health.get(inst)!.failures.at(-1)!.mayQuarantine).to.equal(true);
    health.get(others[0]!)!.state = 'quarantined';
    health.get(others[1]!)!.state = 'quarantined';
    // 2 routable: quarantining one more would leave 1.
    await pool.reportFailure(onInst(), 'captcha', '', { kind: 'token', id: 't' });
    expect(health.get(inst)!.failures.at(-1)!.mayQuarantine).to.equal(false);
    const close = (failure: { kind: 'dial' | 'socks_refused'; scored: boolean; socksReply?: number; destination?: string }) =>
      pool.recordCloses([{ key: null, session: null, instance: inst, bytesUp: 0, bytesDown: 0, ok: false, failure, latencyMs: null, endedAt: 0, host: 'example.test', credential: 'token:t' }], 1);
    close({ kind: 'socks_refused', socksReply: 4, scored: true, destination: 'example.test:80' });
    expect(health.get(inst)!.failures.at(-1), 'a destination nobody could check is scored against nobody').to.include({ scored: false });
    close({ kind: 'dial', scored: true });
    expect(health.get(inst)!.failures.at(-1), 'the instance itself is unreachable').to.include({ scored: true, mayQuarantine: true });
  });

  it('rebalances displaced sessions when quarantined instances come back', async () => {
    const { pool, health, audit } = rig();
    for (const h of health.values()) h.state = 'healthy';
    for (let i = 0; i < 40; i++) {
      const inst = routed(pool.route(socks(`s${i}`), 1));
      pool.recordCloses([{ key: `s${i}`, session: pool.sessions.get(`s${i}`)?.id ?? null, instance: inst, bytesUp: 0, bytesDown: 0, ok: true, latencyMs: 1, endedAt: 0, host: 'example.test', credential: 'token:t' }], 1);
    }
    pool.tick();
    const ids = [...health.keys()];
    for (const id of ids.slice(1)) {
      expect((await pool.instanceAction(id, 'quarantine')).health.state).to.equal('quarantined');
    }
    expect(pool.sessions.countOn(ids[0]!)).to.equal(40);
    pool.tick();
    for (const id of ids.slice(1)) await pool.instanceAction(id, 'release');
    pool.tick();
    for (const id of ids) expect(pool.sessions.countOn(id), `instance ${id}`).to.equal(10);
    expect(audit.recent(50).filter((e) => e.details.reason === 'rebalance' && e.session === null)).to.have.length(3);
  });

  it('forgets the live connections of a worker that died', () => {
    const { pool } = rig();
    pool.route(socks('k'), 1);
    pool.route(socks('k'), 1);
    pool.route(socks('k'), 2);
    const active = (): number => pool.views.sessionView('k').active;
    expect(active()).to.equal(3);
    pool.workerGone(1);
    expect(active()).to.equal(1);
  });

  it('hands back released routes: the live count drops, no request or failure is counted, and a later worker death does not count them twice', () => {
    const { pool, health } = rig();
    const inst = routed(pool.route(socks('k'), 1));
    pool.route(socks('k'), 1);
    pool.route(socks('k'), 1);
    const view = (): { active: number; requests: number; failures: number } =>
      pool.views.sessionView('k');
    expect(view().active).to.equal(3);
    pool.recordReleased([{ key: 'k', session: pool.sessions.get('k')?.id ?? null, instance: inst }], 1);
    expect(view()).to.include({ active: 2, requests: 0, failures: 0 });
    expect(pool.views.summary().totals).to.deep.equal({ requests: 0, failures: 0, bytes_up: 0, bytes_down: 0 });
    expect(health.get(inst)!.failures).to.deep.equal([]);
    pool.recordCloses([{ key: 'k', session: pool.sessions.get('k')?.id ?? null, instance: inst, bytesUp: 1, bytesDown: 2, ok: true, latencyMs: 5, endedAt: 0, host: 'example.test', credential: 'token:t' }], 1);
    expect(view()).to.include({ active: 1, requests: 1 });
    // One connection is still open on worker 1: its death forgets exactly that one.
    pool.workerGone(1);
    expect(view().active).to.equal(0);
    // Routes without a session key (random, session ports) carry nothing to undo.
    pool.recordReleased([{ key: null, session: null, instance: inst }], 1);
    expect(view().active).to.equal(0);
  });

  it('routes nothing to an instance that stops answering: its sessions move, and it takes traffic again once it answers', () => {
    const { pool, instances, audit } = rig();
    const keys = Array.from({ length: 8 }, (_, i) => `k${i}`);
    for (const k of keys) pool.route(socks(k), 0);
    const frozen = instances.get(routed(pool.route(socks('k0'), 0)))!;
    const onFrozen = (): string[] => keys.filter((k) => pool.views.sessionView(k).instance === frozen.id);
    expect(onFrozen().length).to.be.greaterThan(0);
    const routableBefore = pool.views.summary().routable;
    frozen.setResponsive(false);
    expect(onFrozen(), 'sessions moved off at once').to.deep.equal([]);
    expect(pool.views.summary().routable).to.equal(routableBefore - 1);
    for (let n = 0; n < 20; n++) expect(routed(pool.route(socks(`new${n}`), 0))).to.not.equal(frozen.id);
    expect(audit.recent(50).some((e) => e.type === 'instance' && e.instance === frozen.id && /does not answer/.test(e.message))).to.equal(true);
    frozen.setResponsive(true);
    expect(pool.views.summary().routable).to.equal(routableBefore);
  });

  it('drains: moves sessions off and keeps new ones away until released', async () => {
    const { pool } = rig();
    for (let i = 0; i < 8; i++) pool.route(socks(`k${i}`), 0);
    const r = await pool.instanceAction(0, 'drain');
    expect(r.sessions).to.equal(0);
    for (let i = 0; i < 10; i++) expect(routed(pool.route(socks(`n${i}`), 0))).to.not.equal(0);
    await pool.instanceAction(0, 'release');
    expect(pool.placement().routable).to.include(0);
  });

  it('quarantines: moves sessions at once, refuses a second time (409), and release restores', async () => {
    const { pool, audit } = rig();
    for (let i = 0; i < 8; i++) pool.route(socks(`k${i}`), 0);
    const r = await pool.instanceAction(1, 'quarantine');
    expect(r.health.state).to.equal('quarantined');
    expect(r.sessions).to.equal(0);
    expect(pool.views.summary().routable).to.equal(3);
    expect(await refusalOf(pool.instanceAction(1, 'quarantine'))).to.equal('EXITPOOL_INSTANCE_STATE');
    expect(audit.recent().some((e) => e.type === 'assignment' && e.details.reason === 'quarantine')).to.equal(true);
    const released = await pool.instanceAction(1, 'release');
    expect(released.health.state).to.equal('healthy');
  });

  it('rotates a session to another instance; with nowhere to go, rotates its instance', async () => {
    const { pool, instances } = rig({ POOL_SIZE: '2' });
    const first = routed(pool.route(socks('k'), 0));
    const r = await pool.rotateSession('k', true);
    expect(r.instance).to.not.equal(first);
    expect(instances.get(first)!.rotations).to.equal(1); // newnym=true rotated the vacated one
    // Now the vacated instance is mid-rotation: nowhere else to go.
    const again = await pool.rotateSession('k', false);
    expect(again.instance).to.equal(r.instance);
    expect(instances.get(r.instance)!.rotations).to.equal(1);
    expect(await refusalOf(pool.rotateSession('nobody', false))).to.equal('EXITPOOL_NO_SUCH_SESSION');
  });

  it('sweeps a pool rotate one instance at a time; a second request starts nothing', async () => {
    const { pool, instances } = rig({ POOL_SIZE: '3' });
    expect(pool.rotatePool()).to.deep.equal({ rotating: 3, in_progress: true });
    expect(pool.rotatePool()).to.deep.equal({ rotating: 0, in_progress: true });
    await new Promise((r) => setImmediate(r));
    const rotatingNow = [...instances.values()].filter((i) => i.isRotating).length;
    expect(rotatingNow).to.equal(1);
    for (let step = 0; step < 3; step++) {
      const i = [...instances.values()].find((x) => x.isRotating)!;
      i.finishRotation(`127.0.0.${20 + step}`);
      await new Promise((r) => setImmediate(r));
      await new Promise((r) => setImmediate(r));
    }
    expect([...instances.values()].map((i) => i.rotations)).to.deep.equal([1, 1, 1]);
    expect(pool.rotatePool().in_progress).to.equal(true); // a new sweep may start once done
  });

  it('resizes: grows into free indexes, shrinks the highest-numbered after moving sessions', async () => {
    const { pool, instances } = rig();
    for (let i = 0; i < 8; i++) pool.route(socks(`k${i}`), 0);
    const down = pool.resize(2);
    expect(down).to.deep.equal({ size: 2, previous: 4, adding: [], removing: [2, 3] });
    await new Promise((r) => setImmediate(r));
    expect(pool.instanceIds()).to.deep.equal([0, 1]);
    expect(instances.get(3)!.stopped).to.equal(true);
    for (const s of pool.views.sessionViews()) expect([0, 1]).to.include(s.instance);
    const up = pool.resize(3);
    expect(up.adding).to.deep.equal([2]);
    expect(pool.instanceIds()).to.deep.equal([0, 1, 2]);
    expect(await refusalOf(async () => pool.resize(0))).to.equal('EXITPOOL_INVALID_REQUEST');
  });

  it('reports session_port on the by-key read when session ports are on', () => {
    const { pool } = rig({ AUTH_DISABLED: '1', SESSION_PORT_BASE: '30000' });
    const inst = routed(pool.route(socks('k'), 0));
    const v = pool.views.sessionView('k');
    expect(v.session_port).to.equal(30000 + inst);
    expect(pool.views.sessionViews()[0]).to.not.have.property('session_port');
  });

  it('routes a session port only to its own routable instance', async () => {
    const { pool } = rig({ AUTH_DISABLED: '1', SESSION_PORT_BASE: '30000' });
    const r = pool.route({ key: null, named: false, listener: 'session-port', instance: 2 }, 0);
    expect(routed(r)).to.equal(2);
    await pool.instanceAction(2, 'quarantine');
    expect(pool.route({ key: null, named: false, listener: 'session-port', instance: 2 }, 0).ok).to.equal(false);
  });
});

describe('pool before MIN_READY', () => {
  it('refuses until MIN_READY instances have bootstrapped, then keeps serving', () => {
    const { pool, instances } = rig({ MIN_READY: '2' }, false);
    instances.get(0)!.setReady(true);
    expect(pool.route(socks('k'), 0)).to.deep.equal({ ok: false, reason: 'no_routable_instance' });
    instances.get(1)!.setReady(true);
    expect(pool.isServing).to.equal(true);
    expect(pool.route(socks('k'), 0).ok).to.equal(true);
    instances.get(0)!.setReady(false);
    instances.get(1)!.setReady(false);
    instances.get(2)!.setReady(true);
    expect(pool.route(socks('k2'), 0).ok).to.equal(true);
  });
});

describe('pool session rotation', () => {
  it('prefers an instance whose exit differs from the one being left', async () => {
    const { pool, instances } = rig({ POOL_SIZE: '3' });
    instances.get(0)!.exitInfo = fakeExit('127.0.0.11', { exitNickname: 'a' });
    instances.get(1)!.exitInfo = fakeExit('127.0.0.11', { exitNickname: 'a' });
    instances.get(2)!.exitInfo = fakeExit('127.0.0.12', { exitCountry: 'nl', exitNickname: 'b' });
    for (let i = 0; i < 10; i++) {
      const key = `k${i}`;
      pool.route(socks(key), 0);
      const at = pool.views.sessionView(key).instance;
      const r = await pool.rotateSession(key, false);
      expect(r.instance).to.not.equal(at);
      if (at !== 2) expect(r.exit_ip).to.equal('127.0.0.12');
    }
  });

  it('says so (new_exit false, a note, the audit) when no instance is on an exit the session has not used', async () => {
    const { pool, instances, audit } = rig({ POOL_SIZE: '2' });
    // Two /24s: each is a new IP for a session that has used only the other.
    instances.get(0)!.exitInfo = fakeExit('127.20.0.1', { exitNickname: 'a' });
    instances.get(1)!.exitInfo = fakeExit('127.21.0.1', { exitNickname: 'b' });
    pool.route(socks('k'), 0);
    const first = await pool.rotateSession('k', false);
    expect(first).to.deep.include({ new_exit: true, exit_note: '' });
    // Back and forth: the only other instance is now on an exit in the session's history.
    const second = await pool.rotateSession('k', false);
    expect(second.new_exit).to.equal(false);
    expect(second.exit_note).to.match(/last 5 exits/);
    expect(pool.views.sessionView('k').recent_exits).to.have.length(2);
    expect(audit.recent(10).some((e) => e.type === 'rotate' && e.details.new_exit === false)).to.equal(true);
  });
});

describe('pool quarantine', () => {
  it('moves sessions off a burnt exit onto instances with a different exit', async () => {
    const { pool, instances } = rig({ POOL_SIZE: '3' });
    instances.get(0)!.exitInfo = fakeExit('127.0.0.11');
    instances.get(1)!.exitInfo = fakeExit('127.0.0.11');
    instances.get(2)!.exitInfo = fakeExit('127.0.0.12');
    for (let i = 0; i < 9; i++) pool.route(socks(`k${i}`), 0);
    const burnt = pool.views.sessionViews().filter((s) => s.instance === 0).map((s) => s.key);
    expect(burnt.length).to.be.greaterThan(0);
    await pool.instanceAction(0, 'quarantine');
    for (const key of burnt) {
      const v = pool.views.sessionView(key);
      expect(v.instance, key).to.equal(2);
    }
  });
});

describe('pool waiting for its listeners', () => {
  it('serves only once MIN_READY are ready and the proxy listeners are up, in either order', () => {
    const { pool, instances } = fakePool({ POOL_SIZE: '2' }, { readyAll: false, waitForListeners: true });
    instances.get(0)!.setReady(true);
    expect(pool.isServing).to.equal(false);
    expect(pool.views.summary().routable).to.equal(0);
    expect(pool.route(socks('k'), 0).ok).to.equal(false);
    pool.listenersUp();
    expect(pool.isServing).to.equal(true);
    expect(pool.views.summary().routable).to.equal(1);
  });
});

describe('pool after a restart (durable state)', () => {
  it('holds a restored session for its own instance while that one still bootstraps, instead of moving it to the first one ready; one whose instance is gone is moved and audited', () => {
    const { pool, instances, audit } = fakePool({ POOL_SIZE: '2' }, { readyAll: false });
    const base = { createdAt: 0, lastSeen: 0, requests: 1, failures: 0, bytesUp: 0, bytesDown: 0, recentExits: [], domains: [] };
    pool.sessions.restore([
      { ...base, key: 'on-0', instance: 0 },
      { ...base, key: 'on-1', instance: 1 },
      { ...base, key: 'on-9', instance: 9 },
    ]);
    pool.holdRestoredSessions([0, 1, 9]);
    instances.get(0)!.setReady(true);
    expect(routed(pool.route(socks('on-0'), 0))).to.equal(0);
    const held = pool.route(socks('on-1'), 0);
    expect(held.ok, 'refused, not moved').to.equal(false);
    expect(pool.sessions.get('on-1')?.instance).to.equal(1);
    expect(routed(pool.route(socks('on-9'), 0)), 'an instance the pool no longer has: moved at once').to.equal(0);
    const moves = audit.recent(100).filter((e) => e.type === 'assignment' && e.session === 'on-9');
    expect(moves.map((e) => ({ instance: e.instance, details: e.details })), 'the move is audited').to.deep.equal([
      { instance: 0, details: { from: 9, to: 0, reason: 'unroutable' } },
    ]);
    expect(audit.recent(100).filter((e) => e.type === 'assignment' && e.session === 'on-1'), 'a held session is not moved, so not audited').to.deep.equal([]);
    expect(routed(pool.route(socks('new-key'), 0)), 'new keys are not held').to.equal(0);
    instances.get(1)!.setReady(true);
    expect(routed(pool.route(socks('on-1'), 0))).to.equal(1);
  });
});

describe('pool: session parameters from the username', () => {
  const withParams = (key: string, params: RouteParams['params']): RouteParams => ({ key, named: true, listener: 'socks', ...(params ? { params } : {}) });
  function countries(): FakePool {
    const r = rig();
    ['de', 'de', 'nl', 'se'].forEach((c, id) => (r.instances.get(id)!.exitInfo = fakeExit(`10.0.${id}.1`, { exitCountry: c })));
    return r;
  }

  it('serves a session asking for a country only through instances there, and keeps it there through a quarantine', async () => {
    const { pool, health } = countries();
    for (const h of health.values()) h.state = 'healthy';
    for (let i = 0; i < 6; i++) {
      const r = await pool.route(withParams(`de-${i}`, { countries: ['de'] }), 0);
      expect([0, 1]).to.include(routed(r));
    }
    expect(routed(await pool.route(withParams('nl-or-se', { countries: ['se', 'nl'] }), 0))).to.be.oneOf([2, 3]);
    const on0 = pool.sessions.keysOn(0).filter((k) => k.startsWith('de-'));
    await pool.instanceAction(0, 'quarantine');
    for (const k of on0) expect(pool.sessions.get(k)?.instance, k).to.equal(1);
    expect(pool.views.sessionView('de-0').params).to.deep.equal({ countries: ['de'], lifetime_secs: null, mode: 'sticky' });
    expect(pool.views.sessionsByCountry().get('de')).to.equal(6);
  });

  it('refuses clearly when no exit is in the country (PIN_EXIT_RELAY off: none can be assigned), and the latest parameters win', async () => {
    const { pool } = countries();
    const refused = await pool.route(withParams('fr', { countries: ['fr'] }), 0);
    expect(refused.ok === false && refused.reason).to.equal('no_exit_in_country');
    expect(refused.ok === false && refused.detail).to.match(/no exit in fr/);
    expect(pool.sessions.get('fr')).to.equal(undefined);
    expect(routed(await pool.route(withParams('k', { countries: ['nl'] }), 0))).to.equal(2);
    expect(routed(await pool.route(withParams('k', { countries: ['se'] }), 0)), 'moved by its new choice').to.equal(3);
    expect(routed(pool.route(socks('k'), 0)), 'a plain key keeps the choices').to.equal(3);
  });

  it('refuses with country_wait_timeout, counted by country, when the exit assigned there does not serve within COUNTRY_EXIT_WAIT_MS', async () => {
    const clock = { t: 1_000_000 };
    const metrics = new PoolMetrics({
      instanceViews: () => [],
      lifetime: () => null,
      quarantineScore: () => 5,
      totals: () => ({ requests: 0, failures: 0, bytesUp: 0, bytesDown: 0 }),
      sessionCount: () => 0,
      routableCount: () => 0,
      workerRestarts: () => 0,
      workers: () => [],
      connectionLimitPerWorker: 1,
    });
    // A catalog with an exit in every country, assigned by the instance's rotate() below.
    const exits = { hasEligibleIn: () => true, assignment: () => undefined, shortageOf: () => '', current: () => '', release: () => undefined, stop: () => undefined, on: () => undefined, setIdle: () => undefined } as unknown as ExitAssignments;
    const { pool, instances } = fakePool({}, { now: () => clock.t, exits });
    pool.on('country-refused', (c, r) => metrics.countryRefused(c, r));
    ['de', 'de', 'nl', 'se'].forEach((c, id) => (instances.get(id)!.exitInfo = fakeExit(`10.0.${id}.1`, { exitCountry: c })));
    // Instance 0 is given an exit in jp whose circuit never comes: the assignment itself takes all
    // but the last 150 ms of the bound, which the request then waits out for the rotation to end.
    const stuck = instances.get(0)!;
    stuck.rotate = async () => {
      stuck.rotations += 1;
      stuck.isRotating = true;
      clock.t += COUNTRY_EXIT_WAIT_MS - 150;
      return { exit: 'A'.repeat(40), shortage: '' };
    };
    const started = performance.now();
    const refused = await pool.route(withParams('jp-1', { countries: ['jp'] }), 0);
    expect(performance.now() - started, 'waited for the rest of the bound').to.be.at.least(140);
    expect(refused.ok === false && refused.reason).to.equal('country_wait_timeout');
    expect(refused.ok === false && refused.detail).to.match(/an exit in jp was assigned but did not serve within 15 s; retry/);
    expect(stuck.rotations).to.equal(1);
    expect(pool.sessions.get('jp-1'), 'no session for a refused request').to.equal(undefined);
    expect((await metrics.text()).text).to.match(/^pool_country_refusals_total\{country="jp",reason="country_wait_timeout"\} 1$/m);

    // The same path when the new exit serves within the bound: routed through it.
    const quick = instances.get(1)!;
    quick.rotate = async () => {
      quick.isRotating = true;
      setTimeout(() => {
        quick.exitInfo = { ...quick.exitInfo, exitCountry: 'ch' };
        quick.finishRotation('10.8.8.8');
      }, 30);
      return { exit: 'B'.repeat(40), shortage: '' };
    };
    expect(routed(await pool.route(withParams('ch-1', { countries: ['ch'] }), 0))).to.equal(1);
    expect((await metrics.text()).text).to.not.match(/country="ch"/);
  });

  it('resets what a newer username with parameters leaves out to its default, and audits the move it causes as reason params', async () => {
    const { pool, audit } = countries();
    const closeAll = (r: RouteResult): void => {
      if (r.ok) pool.recordCloses([{ key: 'k', session: r.session, instance: r.instance, bytesUp: 1, bytesDown: 1, ok: true, latencyMs: 1, endedAt: 0, host: 'example.test', credential: 'token:t' }], 0);
    };
    const first = await pool.route(withParams('k', { countries: ['de'], mode: 'rotating', lifetimeMs: 60_000 }), 0);
    expect(first.ok && first.lease, 'rotating: never leased').to.equal(false);
    expect([0, 1]).to.include(routed(first));
    closeAll(first);
    expect(pool.views.sessionView('k').params).to.deep.equal({ countries: ['de'], lifetime_secs: 60, mode: 'rotating' });

    // Only a country now: the mode goes back to sticky and the lifetime to SESSION_TTL.
    const seen: number[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await pool.route(withParams('k', { countries: ['nl'] }), 0);
      expect(r.ok && r.lease, `connection ${i}: sticky again, leased`).to.equal(true);
      seen.push(routed(r));
      closeAll(r);
    }
    expect(seen, 'one instance, no rotation').to.deep.equal([2, 2, 2, 2, 2]);
    expect(pool.views.sessionView('k').params).to.deep.equal({ countries: ['nl'], lifetime_secs: null, mode: 'sticky' });
    expect(pool.sessions.expire(Date.now() + 61_000), 'no longer its own 60 s lifetime').to.deep.equal([]);
    const moves = audit.recent(50).filter((e) => e.type === 'assignment' && e.session === 'k' && e.details.reason === 'params');
    expect(moves, 'one move, to the Netherlands').to.have.length(1);
    expect(moves[0]!.details).to.deep.include({ to: 2 });
    expect([0, 1]).to.include(moves[0]!.details.from);

    // Only a mode now: the country goes (any instance fits, so the session stays where it is).
    const last = await pool.route(withParams('k', { mode: 'sticky' }), 0);
    expect(routed(last)).to.equal(2);
    expect(pool.views.sessionView('k').params).to.deep.equal({ countries: [], lifetime_secs: null, mode: 'sticky' });
    expect(pool.views.sessionsByCountry().get('nl') ?? 0).to.equal(0);
  });

  it('gives a rotating session another instance on every connection, counted as its requests, never leased', () => {
    const { pool } = countries();
    const seen: number[] = [];
    for (let i = 0; i < 8; i++) {
      const r = pool.route(withParams('rot', { mode: 'rotating' }), 0) as RouteResult;
      if (!r.ok) throw new Error('refused');
      expect(r.lease).to.equal(false);
      seen.push(r.instance);
      pool.recordCloses([{ key: 'rot', session: r.session, instance: r.instance, bytesUp: 1, bytesDown: 1, ok: true, latencyMs: 1, endedAt: 0, host: 'example.test', credential: 'token:t' }], 0);
    }
    for (let i = 1; i < seen.length; i++) expect(seen[i], `connection ${i}`).to.not.equal(seen[i - 1]);
    expect(pool.views.sessionView('rot').requests).to.equal(8);
  });

  it('expires a session at its own lifetime, shorter or longer than SESSION_TTL', () => {
    let now = 1_000_000;
    const sessions = new SessionTable({ maxSessions: 10, ttlMs: 600_000 });
    const place = { routable: [0], lastResort: null };
    for (const [key, params] of [['short', { lifetimeMs: 60_000 }], ['long', { lifetimeMs: 3_600_000 }], ['default', undefined]] as const) {
      const r = sessions.route(key, place, now, params);
      if (r.ok) sessions.close(key, r.session.id, { bytesUp: 0, bytesDown: 0, ok: true }, now);
    }
    now += 61_000;
    expect(sessions.expire(now)).to.deep.equal(['short']);
    now += 600_000;
    expect(sessions.expire(now)).to.deep.equal(['default']);
    now += 3_600_000;
    expect(sessions.expire(now)).to.deep.equal(['long']);
  });
});
