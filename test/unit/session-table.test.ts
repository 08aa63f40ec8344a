import { expect } from 'chai';
import fc from 'fast-check';
import '../support/fixtures/fuzz-runs.js';
import { SessionTable, type Placement } from '../../supervisor/sessions/session-table.js';

const TTL = 60_000;
const all = (...routable: number[]): Placement => ({ routable, lastResort: null });

function table(maxSessions = 1000): SessionTable {
  let seed = 1;
  // Deterministic tie-breaks.
  const random = (): number => {
    seed = (seed * 16807) % 2147483647;
    return seed / 2147483647;
  };
  return new SessionTable({ maxSessions, ttlMs: TTL, random });
}

function routeOk(t: SessionTable, key: string, p: Placement, now = 0): number {
  const r = t.route(key, p, now);
  if (!r.ok) throw new Error(`refused: ${r.reason}`);
  return r.session.instance;
}

describe('session table', () => {
  it('keeps a key on its instance', () => {
    const t = table();
    const first = routeOk(t, 'alice', all(0, 1, 2, 3));
    for (let i = 0; i < 20; i++) expect(routeOk(t, 'alice', all(0, 1, 2, 3), i)).to.equal(first);
  });

  it('spreads new keys over the instances with the fewest sessions', () => {
    const t = table();
    const seen = new Map<number, number>();
    for (let i = 0; i < 8; i++) {
      const inst = routeOk(t, `k${i}`, all(0, 1, 2, 3));
      seen.set(inst, (seen.get(inst) ?? 0) + 1);
    }
    expect([...seen.keys()].sort()).to.deep.equal([0, 1, 2, 3]);
    expect([...seen.values()]).to.deep.equal([2, 2, 2, 2]);
  });

  it('records the assignment of a new key', () => {
    const t = table();
    const r = t.route('k', all(3), 5);
    expect(r.ok && r.assignment).to.deep.equal({ key: 'k', from: null, to: 3, reason: 'new' });
  });

  it('moves a session whose instance stopped being routable on its next request', () => {
    const t = table();
    const first = routeOk(t, 'k', all(0, 1));
    const other = first === 0 ? 1 : 0;
    const r = t.route('k', all(other), 1);
    expect(r.ok).to.equal(true);
    if (!r.ok) return;
    expect(r.session.instance).to.equal(other);
    expect(r.assignment).to.deep.equal({ key: 'k', from: first, to: other, reason: 'unroutable' });
  });

  it('refuses at once when nothing is routable', () => {
    const t = table();
    expect(t.route('k', all(), 0)).to.deep.equal({ ok: false, reason: 'no_routable_instance' });
  });

  it('uses a single instance mid-rotation only as a last resort', () => {
    const t = table();
    const r = t.route('k', { routable: [], lastResort: 0 }, 0);
    expect(r.ok && r.session.instance).to.equal(0);
  });

  it('counts requests, failures and bytes exactly, and active never goes negative', () => {
    const t = table();
    routeOk(t, 'k', all(0));
    routeOk(t, 'k', all(0));
    expect(t.get('k')!.active).to.equal(2);
    t.close('k', t.get('k')?.id ?? 0, { bytesUp: 10, bytesDown: 100, ok: true }, 1);
    t.close('k', t.get('k')?.id ?? 0, { bytesUp: 1, bytesDown: 0, ok: false }, 2);
    t.close('k', t.get('k')?.id ?? 0, { bytesUp: 0, bytesDown: 0, ok: true }, 3);
    const s = t.get('k')!;
    expect([s.active, s.requests, s.failures, s.bytesUp, s.bytesDown]).to.deep.equal([0, 3, 1, 11, 100]);
  });

  it('expires idle sessions after the TTL but never one with a live connection', () => {
    const t = table();
    routeOk(t, 'idle', all(0), 0);
    t.close('idle', t.get('idle')?.id ?? 0, { bytesUp: 0, bytesDown: 0, ok: true }, 0);
    routeOk(t, 'busy', all(0), 0);
    routeOk(t, 'fresh', all(0), TTL);
    t.close('fresh', t.get('fresh')?.id ?? 0, { bytesUp: 0, bytesDown: 0, ok: true }, TTL);
    expect(t.expire(TTL - 1)).to.deep.equal([]);
    expect(t.expire(TTL)).to.deep.equal(['idle']);
    expect(t.get('busy')).to.not.equal(undefined);
    t.close('busy', t.get('busy')?.id ?? 0, { bytesUp: 0, bytesDown: 0, ok: true }, TTL);
    expect(t.expire(2 * TTL).sort()).to.deep.equal(['busy', 'fresh']);
    expect(t.size).to.equal(0);
  });

  it('rotates a session to a different instance, or reports nowhere to go', () => {
    const t = table();
    const first = routeOk(t, 'k', all(0, 1, 2));
    const a = t.rotate('k', all(0, 1, 2));
    expect(a).to.not.equal(null);
    expect(a!.from).to.equal(first);
    expect(a!.to).to.not.equal(first);
    expect(t.get('k')!.instance).to.equal(a!.to);
    expect(t.rotate('k', all(a!.to))).to.equal(null);
    expect(t.rotate('missing', all(0, 1))).to.equal(null);
  });

  it('moves every session off an instance, spreading them', () => {
    const t = table();
    for (let i = 0; i < 6; i++) routeOk(t, `k${i}`, all(0));
    const moved = t.moveOff(0, all(0, 1, 2), 'drain');
    expect(moved).to.have.length(6);
    expect(t.countOn(0)).to.equal(0);
    expect(t.countOn(1)).to.equal(3);
    expect(t.countOn(2)).to.equal(3);
    expect(moved.every((m) => m.reason === 'drain' && m.from === 0)).to.equal(true);
  });

  it('deletes a session so the next request assigns it afresh', () => {
    const t = table();
    routeOk(t, 'k', all(0, 1));
    expect(t.delete('k')).to.equal(true);
    expect(t.delete('k')).to.equal(false);
    const r = t.route('k', all(0, 1), 1);
    expect(r.ok && r.assignment?.reason).to.equal('new');
  });

  it('is bounded: evicts the least recently seen idle session, never one with a live connection', () => {
    const t = table(2);
    routeOk(t, 'a', all(0), 0); // stays active
    routeOk(t, 'b', all(0), 1);
    t.close('b', t.get('b')?.id ?? 0, { bytesUp: 0, bytesDown: 0, ok: true }, 1);
    routeOk(t, 'c', all(0), 2);
    expect(t.get('b')).to.equal(undefined);
    expect(t.get('a')).to.not.equal(undefined);
    // a and c both have live connections now: a new key is refused.
    expect(t.route('d', all(0), 3)).to.deep.equal({ ok: false, reason: 'session_limit' });
  });

  it('keeps its indexes consistent under any sequence of operations (property)', () => {
    const op = fc.oneof(
      fc.record({ t: fc.constant('route' as const), key: fc.integer({ min: 0, max: 9 }), inst: fc.subarray([0, 1, 2, 3]) }),
      fc.record({ t: fc.constant('close' as const), key: fc.integer({ min: 0, max: 9 }) }),
      fc.record({ t: fc.constant('delete' as const), key: fc.integer({ min: 0, max: 9 }) }),
      fc.record({ t: fc.constant('moveOff' as const), inst: fc.integer({ min: 0, max: 3 }) }),
      fc.record({ t: fc.constant('expire' as const) }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 60 }), (ops) => {
        const t = table(6);
        let now = 0;
        for (const o of ops) {
          now += 7_000;
          if (o.t === 'route') t.route(`k${o.key}`, all(...o.inst), now);
          else if (o.t === 'close') t.close(`k${o.key}`, t.get(`k${o.key}`)?.id ?? 0, { bytesUp: 1, bytesDown: 1, ok: true }, now);
          else if (o.t === 'delete') t.delete(`k${o.key}`);
          else if (o.t === 'moveOff') t.moveOff(o.inst, all(0, 1, 2, 3), 'drain');
          else t.expire(now);
        }
        let indexed = 0;
        for (let i = 0; i < 4; i++) {
          for (const key of t.keysOn(i)) expect(t.get(key)!.instance).to.equal(i);
          indexed += t.countOn(i);
        }
        expect(indexed).to.equal(t.size);
        expect(t.size).to.be.at.most(6);
        for (const s of t.all()) expect(s.active).to.be.at.least(0);
      }),
    );
  });

  describe('rebalance after instances come back', () => {
    /** n idle sessions spread over 0..3, then everything piled onto 0 by quarantines of 1, 2 and 3. */
    function piled(n: number): SessionTable {
      const t = table();
      for (let i = 0; i < n; i++) {
        routeOk(t, `k${i}`, all(0, 1, 2, 3));
        t.close(`k${i}`, t.get(`k${i}`)?.id ?? 0, { bytesUp: 0, bytesDown: 0, ok: true }, 0);
      }
      t.moveOff(1, all(0, 2, 3), 'quarantine');
      t.moveOff(2, all(0, 3), 'quarantine');
      t.moveOff(3, all(0), 'quarantine');
      expect(t.countOn(0)).to.equal(n);
      return t;
    }

    it('moves displaced idle sessions until no routable instance holds more than its share', () => {
      const t = piled(1000);
      const moved = t.rebalance(all(0, 1, 2, 3));
      expect(moved.every((a) => a.reason === 'rebalance' && a.from === 0)).to.equal(true);
      for (const id of [0, 1, 2, 3]) expect(t.countOn(id), `instance ${id}`).to.be.within(249, 250);
      expect(moved).to.have.length(1000 - t.countOn(0));
      // Balanced now: another call moves nothing.
      expect(t.rebalance(all(0, 1, 2, 3))).to.deep.equal([]);
    });

    it('never moves a session with a live connection, nor one its client placed or rotated', () => {
      const t = piled(40);
      // k0 is busy; k1 was rotated by its client after the pile-up.
      routeOk(t, 'k0', all(0));
      const rotated = t.rotate('k1', all(0, 1));
      expect(rotated?.to).to.equal(1);
      t.moveOff(1, all(0), 'quarantine');
      // k2 is new since: placed by the pool for its client, on 0, not displaced.
      t.delete('k2');
      routeOk(t, 'k2', all(0));
      const moved = t.rebalance(all(0, 1, 2, 3)).map((a) => a.key);
      expect(moved).to.not.include('k0');
      expect(moved).to.not.include('k2');
      expect(t.get('k0')?.instance).to.equal(0);
      expect(t.get('k2')?.instance).to.equal(0);
    });

    it('never moves a session back onto the instance it was moved off (its exit was just reported burnt)', () => {
      const t = table();
      for (let i = 0; i < 30; i++) {
        routeOk(t, `k${i}`, all(0, 1, 2));
        t.close(`k${i}`, t.get(`k${i}`)?.id ?? 0, { bytesUp: 0, bytesDown: 0, ok: true }, 0);
      }
      const fled = new Set(t.keysOn(2));
      t.moveOff(2, all(0, 1), 'quarantine');
      expect(t.countOn(2)).to.equal(0);
      // Instance 2 is back at once (a new circuit): the pile on 0 and 1 is over share, but only
      // sessions displaced from elsewhere could go to 2, and there are none.
      const moved = t.rebalance(all(0, 1, 2));
      expect(moved.filter((a) => fled.has(a.key) && a.to === 2)).to.deep.equal([]);
      for (const key of fled) expect(t.get(key)?.instance, key).to.not.equal(2);
    });

    it('spreads a pile again as instances come back one at a time (a session spread onto the first may move on)', () => {
      const t = piled(400);
      t.rebalance(all(0, 1));
      t.rebalance(all(0, 1, 2));
      t.rebalance(all(0, 1, 2, 3));
      for (const id of [0, 1, 2, 3]) expect(t.countOn(id), `instance ${id}`).to.be.at.most(100);
      // Balanced now: nothing moves again.
      expect(t.rebalance(all(0, 1, 2, 3))).to.deep.equal([]);
    });

    it('lets a session a drain displaced go back (nothing was burnt there), directly', () => {
      const t = table();
      for (let i = 0; i < 12; i++) {
        routeOk(t, `k${i}`, all(0, 1, 2));
        t.close(`k${i}`, t.get(`k${i}`)?.id ?? 0, { bytesUp: 0, bytesDown: 0, ok: true }, 0);
      }
      t.moveOff(2, all(0, 1), 'drain');
      const moved = t.rebalance(all(0, 1, 2));
      expect(moved.every((a) => a.to === 2)).to.equal(true);
      for (const id of [0, 1, 2]) expect(t.countOn(id), `instance ${id}`).to.equal(4);
    });

    it('property: rebalancing never raises the largest load and moves only displaced idle sessions', () => {
      fc.assert(
        fc.property(fc.integer({ min: 0, max: 300 }), fc.integer({ min: 2, max: 6 }), fc.array(fc.boolean(), { maxLength: 300 }), (n, size, busy) => {
          const t = table();
          const ids = Array.from({ length: size }, (_, i) => i);
          for (let i = 0; i < n; i++) {
            routeOk(t, `k${i}`, all(...ids));
            if (busy[i] !== true) t.close(`k${i}`, t.get(`k${i}`)?.id ?? 0, { bytesUp: 0, bytesDown: 0, ok: true }, 0);
          }
          for (const id of ids.slice(1)) t.moveOff(id, all(0), 'quarantine');
          const before = Math.max(...ids.map((id) => t.countOn(id)));
          const moved = t.rebalance(all(...ids));
          expect(Math.max(...ids.map((id) => t.countOn(id)))).to.be.at.most(before);
          for (const a of moved) expect(t.get(a.key)?.active, a.key).to.equal(0);
          expect(ids.reduce((sum, id) => sum + t.countOn(id), 0)).to.equal(n);
          expect(t.displacedCount).to.equal([...t.all()].filter((x) => x.displaced !== undefined).length);
        }),
      );
    });
  });
});
