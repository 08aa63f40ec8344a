import { expect } from 'chai';
import fc from 'fast-check';
import type { RouteInvalidation, RouteParams, RouteResult } from '../../shared/ipc/protocol.js';
import type { Pool } from '../../supervisor/pool/pool.js';
import { RouteLeases } from '../../supervisor/routing/route-leases.js';
import { LeasedRouter, PARSED_USERNAME_CACHE_MAX } from '../../workers/proxy-worker/leased-router.js';
import type { RouteDecision, RouteRequest } from '../../workers/proxy/proxy-types.js';
import { fakePool, type FakePool } from '../support/fakes/pool-parts.js';
import { quietLogger } from '../support/fakes/quiet-logger.js';

/** A supervisor whose answers the test releases one by one. */
class ScriptedSupervisor {
  readonly asked: RouteParams[] = [];
  private waiting: Array<(r: RouteResult) => void> = [];

  ask = (p: RouteParams): Promise<RouteResult> => {
    this.asked.push(p);
    return new Promise((resolve) => this.waiting.push(resolve));
  };

  get outstanding(): number {
    return this.waiting.length;
  }

  answer(r: RouteResult): void {
    const next = this.waiting.shift();
    if (!next) throw new Error('nothing asked');
    next(r);
  }
}

const grant = (instance: number, key: string | null, session: number | null, lease = true): RouteResult => ({
  ok: true,
  instance,
  host: '127.0.0.1',
  port: 9000 + instance,
  key,
  session,
  lease,
  exitIp: '',
});
/** The default grammar settings; the refused usernames go to `badUsernames`. */
const badUsernames: string[] = [];
const USERNAME_OPTIONS = { usernameParams: true, sessionTtlMaxMs: 86_400_000, onBadUsername: (detail: string) => void badUsernames.push(detail) };
const socks = (sessionKey: string | null, clientIp = '10.0.0.1'): RouteRequest => ({ sessionKey, clientIp, listener: 'socks' });
const instanceOf = (d: RouteDecision): number | string => (d.ok ? d.instance : d.reason);
const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

function router(sup: ScriptedSupervisor, defaultSession: 'ip' | 'random' | 'shared' = 'ip'): { router: LeasedRouter; opened: () => number } {
  const r = new LeasedRouter({ ask: sup.ask, defaultSession, onRoundTrip: () => undefined, log: quietLogger(), ...USERNAME_OPTIONS });
  let opened = 0;
  return {
    router: r,
    opened: () => {
      opened += r.takeOpened().length;
      return opened;
    },
  };
}

describe('route leases: the proxy worker’s router', () => {
  it('asks once per key, then routes from the lease and reports each such connection as opened', async () => {
    const sup = new ScriptedSupervisor();
    const { router: r, opened } = router(sup);
    const first = r.route(socks('k'));
    sup.answer(grant(2, 'k', 7));
    expect(instanceOf(await first)).to.equal(2);
    for (let i = 0; i < 5; i++) expect(instanceOf(await r.route(socks('k')))).to.equal(2);
    expect(sup.asked).to.have.length(1);
    expect(r.takeOpened()).to.deep.equal(Array.from({ length: 5 }, () => ({ key: 'k', session: 7, instance: 2 })));
    expect(r.takeOpened()).to.deep.equal([]);
    expect(opened()).to.equal(0);
  });

  it('resolves DEFAULT_SESSION as the supervisor does: one lease per address under ip, one for all under shared, none under random', async () => {
    for (const [mode, asks] of [['ip', 2], ['shared', 1], ['random', 4]] as const) {
      const sup = new ScriptedSupervisor();
      const { router: r } = router(sup, mode);
      for (const ip of ['10.0.0.1', '10.0.0.2', '10.0.0.1', '10.0.0.2']) {
        const p = r.route(socks(null, ip));
        await tick();
        if (sup.outstanding > 0) {
          const key = mode === 'ip' ? `ip:${ip}` : mode === 'shared' ? 'shared' : null;
          sup.answer(grant(1, key, key === null ? null : 1, key !== null));
        }
        expect(instanceOf(await p)).to.equal(1);
      }
      expect(sup.asked, mode).to.have.length(asks);
    }
  });

  it('reads the client address only when the route needs it (it costs the listener a getpeername call)', async () => {
    const sup = new ScriptedSupervisor();
    const { router: r } = router(sup, 'ip');
    let reads = 0;
    const counted = (sessionKey: string | null): RouteRequest => ({
      sessionKey,
      listener: 'socks',
      get clientIp() {
        reads++;
        return '10.0.0.9';
      },
    });
    const first = r.route(counted('k'));
    sup.answer(grant(1, 'k', 3));
    await first;
    for (let i = 0; i < 3; i++) await r.route(counted('k'));
    // A named session never needs it: its key is the username's.
    expect(reads).to.equal(0);
    const unnamed = r.route(counted(null));
    await tick();
    sup.answer(grant(1, 'ip:10.0.0.9', 4));
    await unnamed;
    await r.route(counted(null));
    // DEFAULT_SESSION=ip reads it for every unnamed connection: it is the key, decided here once.
    expect(sup.asked.map((a) => [a.key, a.named])).to.deep.equal([
      ['k', true],
      ['ip:10.0.0.9', false],
    ]);
    expect(reads).to.equal(2);
  });

  it('never leases a session port’s route, nor one the supervisor did not offer as a lease', async () => {
    const sup = new ScriptedSupervisor();
    const { router: r } = router(sup);
    for (let i = 0; i < 2; i++) {
      const p = r.route({ sessionKey: null, clientIp: '10.0.0.1', listener: 'session-port', instanceId: 3 });
      sup.answer(grant(3, null, null, false));
      await p;
      const q = r.route(socks('last-resort'));
      sup.answer(grant(0, 'last-resort', 1, false));
      await q;
    }
    expect(sup.asked).to.have.length(4);
    expect(r.leaseCount).to.equal(0);
  });

  it('a burst on one key waits for the one answer being asked for; a refusal is shared, not retried', async () => {
    const sup = new ScriptedSupervisor();
    const { router: r, opened } = router(sup);
    const burst = Array.from({ length: 50 }, () => r.route(socks('burst')));
    await tick();
    expect(sup.asked).to.have.length(1);
    sup.answer(grant(1, 'burst', 3));
    expect((await Promise.all(burst)).map(instanceOf)).to.deep.equal(Array(50).fill(1));
    expect(opened(), 'the 49 that waited are lease routes').to.equal(49);

    const refused = Array.from({ length: 5 }, () => r.route(socks('full')));
    await tick();
    sup.answer({ ok: false, reason: 'session_limit' });
    expect((await Promise.all(refused)).map(instanceOf)).to.deep.equal(Array(5).fill('session_limit'));
    expect(sup.asked).to.have.length(2);
  });

  it('drops leases by key and by instance', async () => {
    const sup = new ScriptedSupervisor();
    const { router: r } = router(sup);
    for (const [key, instance] of [['a', 0], ['b', 0], ['c', 1], ['d', 2]] as const) {
      const p = r.route(socks(key));
      sup.answer(grant(instance, key, 1));
      await p;
    }
    expect(r.invalidate({ keys: ['d', 'nope'], instances: [0] })).to.equal(3);
    expect(r.leaseCount).to.equal(1);
    const again = r.route(socks('a'));
    await tick();
    expect(sup.asked).to.have.length(5);
    sup.answer(grant(1, 'a', 1));
    expect(instanceOf(await again)).to.equal(1);
  });

  it('an answer that crossed an invalidation serves its connection but is not kept', async () => {
    const sup = new ScriptedSupervisor();
    const { router: r } = router(sup);
    const p = r.route(socks('k'));
    await tick();
    // The supervisor answered, then moved the session; both arrive before the answer is read.
    r.invalidate({ keys: ['k'], instances: [] });
    sup.answer(grant(2, 'k', 1));
    expect(instanceOf(await p)).to.equal(2);
    expect(r.leaseCount).to.equal(0);
  });

  it('refuses at once when the supervisor cannot be reached', async () => {
    const r = new LeasedRouter({ ask: () => Promise.reject(new Error('IPC timeout')), defaultSession: 'ip', onRoundTrip: () => undefined, log: quietLogger(), ...USERNAME_OPTIONS });
    expect(instanceOf(await r.route(socks('k')))).to.equal('supervisor_unavailable');
    expect(r.leaseCount).to.equal(0);
  });

  it('property: whatever the order of answers and invalidations, no lease outlives an invalidation that followed its answer', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.oneof(fc.constant('route' as const), fc.constant('answer' as const), fc.constant('invalidate' as const)), { maxLength: 40 }), async (steps) => {
        const sup = new ScriptedSupervisor();
        const { router: r } = router(sup);
        let instance = 0;
        const pending: Promise<RouteDecision>[] = [];
        for (const step of steps) {
          if (step === 'route') pending.push(r.route(socks('k')));
          else if (step === 'answer' && sup.outstanding > 0) sup.answer(grant(instance, 'k', 1));
          else if (step === 'invalidate') {
            // The supervisor moves the session: everything it answers from now on names the new instance.
            instance++;
            r.invalidate({ keys: ['k'], instances: [] });
          }
          await tick();
        }
        // A lease, if one is held, names the instance the supervisor would answer now.
        const lease = (r as unknown as { leases: Map<string, { instance: number }> }).leases.get('k');
        if (lease) expect(lease.instance).to.equal(instance);
        // Drain: connections whose answer was not kept ask again, a turn later.
        for (;;) {
          await tick();
          if (sup.outstanding === 0) break;
          sup.answer(grant(instance, 'k', 1));
        }
        await Promise.all(pending);
      }),
      { numRuns: 200 },
    );
  });
});

describe('route leases: session parameters in the username', () => {
  it('sends the key and its parameters apart, and refuses malformed parameters without asking', async () => {
    const sup = new ScriptedSupervisor();
    const { router: r } = router(sup);
    badUsernames.length = 0;
    const refused = await r.route(socks('k-country-deu'));
    expect(refused.ok === false && refused.reason).to.equal('bad_session_params');
    expect(refused.ok === false && refused.detail).to.match(/two-letter/);
    expect(badUsernames).to.have.length(1);
    expect(await r.route(socks('k-sesstime-100000')).then((d) => d.ok === false && d.detail)).to.match(/SESSION_TTL_MAX/);
    expect(sup.asked).to.have.length(0);
    const p = r.route(socks('k-country-de'));
    await tick();
    expect(sup.asked[0]).to.deep.include({ key: 'k', params: { countries: ['de'] } });
    sup.answer(grant(1, 'k', 1));
    expect(instanceOf(await p)).to.equal(1);
  });

  it('refuses an ip: key that is not the connection’s own address, decoded or raw, with or without parameters', async () => {
    const sup = new ScriptedSupervisor();
    const { router: r } = router(sup);
    const off = new LeasedRouter({ ask: sup.ask, defaultSession: 'ip', onRoundTrip: () => undefined, log: quietLogger(), ...USERNAME_OPTIONS, usernameParams: false });
    for (const [router_, username] of [
      [r, 'ip:127.0.0.2'],
      [r, 'ip:127.0.0.2-country-jp'],
      [r, 'ip%3A127.0.0.2-mode-rotating'],
      [off, 'ip:127.0.0.2'],
    ] as const) {
      const refused = await router_.route(socks(username, '10.0.0.1'));
      expect(refused.ok === false && refused.reason, username).to.equal('bad_session_params');
      expect(refused.ok === false && refused.detail, username).to.match(/ip:/);
    }
    expect(sup.asked, 'the supervisor is never asked').to.have.length(0);
    // Its own address's key is the session DEFAULT_SESSION gives it anyway.
    const own = r.route(socks('ip:10.0.0.1', '10.0.0.1'));
    await tick();
    expect(sup.asked[0]).to.deep.include({ key: 'ip:10.0.0.1', named: true });
    sup.answer(grant(1, 'ip:10.0.0.1', 1));
    expect(instanceOf(await own)).to.equal(1);
  });

  it('leases per key and parameters: the same parameters or a plain key reuse it, other parameters ask again', async () => {
    const sup = new ScriptedSupervisor();
    const { router: r } = router(sup);
    const p = r.route(socks('k-country-de'));
    sup.answer(grant(1, 'k', 1));
    await p;
    expect(instanceOf(await r.route(socks('k-country-de')))).to.equal(1);
    expect(instanceOf(await r.route(socks('k')))).to.equal(1);
    expect(sup.asked).to.have.length(1);
    const q = r.route(socks('k-country-nl'));
    await tick();
    expect(sup.asked).to.have.length(2);
    sup.answer(grant(2, 'k', 1));
    expect(instanceOf(await q)).to.equal(2);
    expect(instanceOf(await r.route(socks('k-country-nl')))).to.equal(2);
    expect(sup.asked).to.have.length(2);
  });

  it('asks for every connection of a rotating session, and reads raw keys with USERNAME_PARAMS off', async () => {
    const sup = new ScriptedSupervisor();
    const { router: r } = router(sup);
    for (let i = 0; i < 3; i++) {
      const p = r.route(socks('k-mode-rotating'));
      await tick();
      sup.answer(grant(i, 'k', 1, false));
      expect(instanceOf(await p)).to.equal(i);
    }
    expect(sup.asked).to.have.length(3);
    const raw = new ScriptedSupervisor();
    const off = new LeasedRouter({ ask: raw.ask, defaultSession: 'ip', onRoundTrip: () => undefined, log: quietLogger(), ...USERNAME_OPTIONS, usernameParams: false });
    const q = off.route(socks('k-country-deu'));
    await tick();
    expect(raw.asked[0]).to.deep.include({ key: 'k-country-deu' });
    expect(raw.asked[0]?.params).to.equal(undefined);
    raw.answer(grant(0, 'k-country-deu', 1));
    expect(instanceOf(await q)).to.equal(0);
  });
});

describe('route leases: what the router knows without waiting (routeKnown)', () => {
  it('answers a leased key at once and counts it opened, and leaves everything else to route()', async () => {
    const sup = new ScriptedSupervisor();
    const { router: r } = router(sup);
    expect(r.routeKnown(socks('k')), 'no lease yet').to.equal(undefined);
    expect(sup.asked, 'routeKnown never asks').to.have.length(0);
    const first = r.route(socks('k'));
    sup.answer(grant(2, 'k', 7));
    await first;
    const known = r.routeKnown(socks('k'));
    expect(known !== undefined && instanceOf(known)).to.equal(2);
    expect(r.takeOpened()).to.deep.equal([{ key: 'k', session: 7, instance: 2 }]);
    // Other parameters than the lease's, a rotating session, a session port: the supervisor decides.
    expect(r.routeKnown(socks('k-country-nl'))).to.equal(undefined);
    expect(r.routeKnown(socks('k-mode-rotating'))).to.equal(undefined);
    expect(r.routeKnown({ sessionKey: null, clientIp: '10.0.0.1', listener: 'session-port', instanceId: 2 })).to.equal(undefined);
    r.invalidate({ keys: ['k'], instances: [] });
    expect(r.routeKnown(socks('k')), 'after an invalidation').to.equal(undefined);
    expect(r.takeOpened()).to.deep.equal([]);
    expect(sup.asked).to.have.length(1);
  });

  it('refuses a malformed username at once, as route() does, every time it is presented', () => {
    const sup = new ScriptedSupervisor();
    const { router: r } = router(sup);
    badUsernames.length = 0;
    for (let i = 0; i < 3; i++) {
      const refused = r.routeKnown(socks('k-country-nowhere'));
      expect(refused).to.deep.include({ ok: false, reason: 'bad_session_params' });
    }
    expect(badUsernames, 'each refusal is reported (a refusal is never remembered)').to.have.length(3);
    expect(sup.asked).to.have.length(0);
  });

  it('reads a username the same way the thousandth time, beyond the bound of remembered usernames too', async () => {
    const sup = new ScriptedSupervisor();
    const { router: r } = router(sup);
    const names = Array.from({ length: PARSED_USERNAME_CACHE_MAX + 2 }, (_, i) => `user${i}-country-de`);
    for (const name of [...names, ...names.slice(0, 3)]) {
      const p = r.route(socks(name));
      await tick();
      const asked = sup.asked.at(-1);
      expect(asked?.key).to.equal(name.replace('-country-de', ''));
      expect(asked?.params).to.deep.equal({ countries: ['de'] });
      sup.answer(grant(1, asked?.key ?? null, 1, false));
      await p;
    }
    expect(sup.asked).to.have.length(names.length + 3);
  });
});

describe('route leases: the supervisor’s invalidations', () => {
  it('sends the changes of one turn together, and settled() waits for the acknowledgement', async () => {
    const sent: RouteInvalidation[] = [];
    let ack: (() => void) | undefined;
    const leases = new RouteLeases((inv) => {
      sent.push(inv);
      return new Promise<void>((r) => (ack = r));
    });
    leases.granted(1);
    leases.granted(2);
    leases.sessionChanged('a');
    leases.sessionChanged('b');
    leases.routableNow([0, 2]);
    leases.routableNow([0, 2]);
    expect(sent).to.have.length(0);
    let settled = false;
    const done = leases.settled().then(() => (settled = true));
    expect(sent).to.deep.equal([{ keys: ['a', 'b'], instances: [1] }]);
    await tick();
    expect(settled).to.equal(false);
    ack?.();
    await done;
    // Instance 1 carries no lease any more until one is granted there again.
    leases.routableNow([]);
    await tick();
    expect(sent[1]).to.deep.equal({ keys: [], instances: [2] });
    leases.stop();
  });

  it('settles at once when nothing was sent, and waits only for what was sent before it was asked', async () => {
    const acks: Array<() => void> = [];
    const leases = new RouteLeases(() => new Promise<void>((r) => acks.push(r)));
    let first = false;
    await leases.settled();
    leases.sessionChanged('x');
    const firstSettled = leases.settled().then(() => (first = true));
    expect(acks).to.have.length(1);
    leases.sessionChanged('y');
    await tick();
    expect(acks, 'y went out in its own turn').to.have.length(2);
    acks[0]?.();
    await firstSettled;
    expect(first).to.equal(true);
    let second = false;
    const secondSettled = leases.settled().then(() => (second = true));
    await tick();
    expect(second, 'y is not acknowledged yet').to.equal(false);
    acks[1]?.();
    await secondSettled;
    leases.stop();
  });
});

describe('route leases: the pool grants them and counts what they route', () => {
  function rig(env: Record<string, string> = {}): FakePool & { sent: RouteInvalidation[] } {
    const sent: RouteInvalidation[] = [];
    const sendInvalidation = (inv: RouteInvalidation): Promise<void> => {
      sent.push(inv);
      return Promise.resolve();
    };
    return { ...fakePool({ POOL_SIZE: '3', ...env }, { sendInvalidation }), sent };
  }
  const route = (pool: Pool, key: string | null, worker = 1): Extract<RouteResult, { ok: true }> => {
    const r = pool.route({ key, named: true, listener: 'socks' }, worker);
    if (!r.ok) throw new Error(r.reason);
    return r;
  };

  it('leases a session’s route and counts the connections routed with it as route() does', () => {
    const { pool } = rig();
    const r = route(pool, 'k');
    expect(r).to.include({ lease: true, key: 'k' });
    pool.recordOpened([{ key: 'k', session: r.session as number, instance: r.instance }], 1);
    pool.recordOpened([{ key: 'k', session: r.session as number, instance: r.instance }], 2);
    expect(pool.views.sessionView('k').active).to.equal(3);
    pool.workerGone(2);
    expect(pool.views.sessionView('k').active).to.equal(2);
    pool.recordCloses([1, 2].map(() => ({ key: 'k', session: r.session, instance: r.instance, bytesUp: 1, bytesDown: 1, ok: true, latencyMs: 1, endedAt: 0, host: 'example.test', credential: 'token:t' })), 1);
    expect(pool.views.sessionView('k')).to.include({ active: 0, requests: 2 });
    pool.stop().catch(() => undefined);
  });

  it('ignores what a lease routed for an earlier incarnation of a key', async () => {
    const { pool, sent } = rig();
    const old = route(pool, 'k');
    await pool.deleteSession('k');
    await pool.leasesSettled();
    expect(sent.at(-1)?.keys).to.deep.equal(['k']);
    const fresh = route(pool, 'k');
    expect(fresh.session).to.not.equal(old.session);
    pool.recordOpened([{ key: 'k', session: old.session as number, instance: old.instance }], 1);
    pool.recordCloses([{ key: 'k', session: old.session, instance: old.instance, bytesUp: 5, bytesDown: 5, ok: true, latencyMs: 1, endedAt: 0, host: 'example.test', credential: 'token:t' }], 1);
    expect(pool.views.sessionView('k')).to.include({ active: 1, requests: 0, bytes_up: 0 });
    pool.stop().catch(() => undefined);
  });

  it('invalidates the leases on an instance as soon as it leaves service, and keys as their sessions move', async () => {
    const { pool, sent } = rig();
    const r = route(pool, 'k');
    await pool.instanceAction(r.instance, 'drain');
    await pool.leasesSettled();
    const all = { keys: sent.flatMap((s) => s.keys), instances: sent.flatMap((s) => s.instances) };
    expect(all.keys).to.include('k');
    expect(all.instances).to.include(r.instance);
    pool.stop().catch(() => undefined);
  });

  it('leases the session DEFAULT_SESSION=ip gives, never a DEFAULT_SESSION=random route', () => {
    const { pool } = rig();
    expect(pool.route({ key: 'ip:10.0.0.9', named: false, listener: 'socks' }, 1)).to.include({ lease: true, key: 'ip:10.0.0.9' });
    const { pool: random } = rig({ DEFAULT_SESSION: 'random' });
    expect(random.route({ key: null, named: false, listener: 'socks' }, 1)).to.include({ lease: false, key: null, session: null });
    pool.stop().catch(() => undefined);
    random.stop().catch(() => undefined);
  });

  it('drops the leases on an instance that leaves service without its sessions moving (rotation with DRAIN_ON_ROTATE off, nowhere to go)', async () => {
    const { pool, sent } = rig({ DRAIN_ON_ROTATE: 'false' });
    const r = route(pool, 'k');
    await pool.instanceAction(r.instance, 'rotate');
    await pool.leasesSettled();
    expect(sent.flatMap((s) => s.instances)).to.deep.equal([r.instance]);
    expect(sent.flatMap((s) => s.keys), 'the session itself did not move').to.deep.equal([]);
    // Drain every instance: the last one's sessions have nowhere to go, its leases still go.
    const s = route(pool, 'stays');
    for (const id of [0, 1, 2].filter((x) => x !== s.instance)) await pool.instanceAction(id, 'drain');
    sent.length = 0;
    await pool.instanceAction(s.instance, 'drain');
    await pool.leasesSettled();
    expect(pool.views.sessionView('stays').instance, 'nowhere to go').to.equal(s.instance);
    expect(sent.flatMap((x) => x.instances)).to.include(s.instance);
    pool.stop().catch(() => undefined);
  });
});
