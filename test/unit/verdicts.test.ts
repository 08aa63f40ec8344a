import { expect } from 'chai';
import type { DestinationProbe, DestinationProbeResult, RouteResult } from '../../shared/ipc/protocol.js';
import { AuditLog } from '../../supervisor/audit/audit-log.js';
import { ExitAssignments } from '../../supervisor/exits/exit-assignments.js';
import { addressBlock, asPublished, type ExitRelay } from '../../supervisor/exits/exit-relay.js';
import { partyResolver } from '../../supervisor/verdicts/parties.js';
import { ExitComplaints } from '../../supervisor/verdicts/exit-complaints.js';
import { hostIsSite, VisitLog } from '../../supervisor/verdicts/visit-log.js';
import { fakeExit, fakePool } from '../support/fakes/pool-parts.js';
import { quietLogger } from '../support/fakes/quiet-logger.js';

const fp = (c: string): string => c.repeat(40).toUpperCase();

function relay(c: string, address: string, country: string): ExitRelay {
  return asPublished({ fingerprint: fp(c), nickname: `n${c}`, address, country, bandwidth: 1000, block: addressBlock(address), family: fp(c) });
}

/** Six exits: two in de, two in nl, one in fr, one in us (each its own /24). */
const CATALOG = [relay('a', '10.1.0.1', 'de'), relay('b', '10.2.0.1', 'de'), relay('c', '10.3.0.1', 'nl'), relay('d', '10.4.0.1', 'nl'), relay('e', '10.5.0.1', 'fr'), relay('f', '10.6.0.1', 'us')];

/** Token owners: alice and carol are acme's, bob is globex's, ops is the operator's own. */
const OWNERS = new Map([
  ['alice', 'acme'],
  ['carol', 'acme'],
  ['bob', 'globex'],
  ['ops', ''],
]);
const token = (id: string) => ({ kind: 'token', id }) as const;

function routed(r: RouteResult | Promise<RouteResult>): number {
  if (r instanceof Promise || !r.ok) throw new Error('not routed at once');
  return r.instance;
}

/**
 * A pool of four instances pinned to exits of CATALOG (real ExitAssignments), fake tors and
 * health, every credential's party by OWNERS, and a destination check that answers `checks`.
 */
function rig(env: Record<string, string> = {}, checks: (p: DestinationProbe) => DestinationProbeResult | null = () => null) {
  const clock = { t: 50_000_000 };
  const exits = new ExitAssignments({ unit: 'subnet', banTtlMs: 3 * 3_600_000, exitNodes: [], strictNodes: false, audit: new AuditLog(), log: quietLogger(), now: () => clock.t, random: () => 0 });
  exits.catalog.replace(CATALOG, 1);
  const probes: DestinationProbe[] = [];
  const rigged = fakePool(
    { POOL_SIZE: '4', ...env },
    {
      exits,
      now: () => clock.t,
      partyOf: partyResolver((id) => OWNERS.get(id) ?? null),
      probeDestination: async (p) => {
        probes.push(p);
        return checks(p);
      },
    },
  );
  const { pool, instances, health } = rigged;
  const pin = (id: number, countries?: string[]): void => {
    const next = exits.next(id, { fresh: false, why: 'bootstrap', ...(countries ? { countries } : {}) });
    if (!next.ok) throw new Error('no exit');
    const i = instances.get(id)!;
    i.exitInfo = fakeExit(next.relay.address, { exitFingerprint: next.relay.fingerprint, exitCountry: next.relay.country });
  };
  for (const id of instances.keys()) pin(id);
  for (const h of health.values()) h.state = 'healthy';
  const fingerprintOn = (id: number): string => instances.get(id)!.exitInfo.exitFingerprint;
  /** A finished request of session `key` to `host`, opened with `credential`. */
  const visit = (key: string, host: string, credential: string): void => {
    const s = pool.sessions.get(key)!;
    pool.recordCloses([{ key, session: s.id, instance: s.instance, bytesUp: 1, bytesDown: 1, ok: true, latencyMs: 1, endedAt: clock.t, host, credential }], 1);
  };
  /** A new session on instance `id` (keys are placed on the least loaded instance). */
  let n = 0;
  const sessionOn = (id: number): string => {
    for (let tries = 0; tries < 100; tries++) {
      const key = `s${n++}`;
      // A miss stays: it loads another instance, so the least loaded is soon `id`.
      if (routed(pool.route({ key, named: true, listener: 'socks' }, 1)) === id) return key;
    }
    throw new Error(`no session lands on ${id}`);
  };
  const instanceOnExit = (c: string): number => [...instances.keys()].find((id) => fingerprintOn(id) === fp(c)) ?? -1;
  return { ...rigged, exits, clock, probes, pin, visit, sessionOn, fingerprintOn, instanceOnExit };
}

describe('verdicts: what evidence earns (supervisor/verdicts/README.md, the table)', () => {
  describe('move the reported session', () => {
    it('moves it at once, beyond its credential’s budget too, with the sessions that credential sent through that exit, and no one else’s', async () => {
      const r = rig({ CLIENT_REPORT_BUDGET: '1/1m' });
      const inst = 0;
      const [mine, alsoMine, bystander] = [r.sessionOn(inst), r.sessionOn(inst), r.sessionOn(inst)];
      r.visit(mine, 'shop.example', 'token:alice');
      r.visit(alsoMine, 'shop.example', 'token:alice');
      r.visit(bystander, 'shop.example', 'token:bob');
      const first = await r.pool.reportFailure(mine, 'other', '', token('alice'));
      expect(first).to.include({ scored: true, moved: true });
      expect(r.pool.views.sessionView(mine).instance).to.not.equal(inst);
      expect(r.pool.views.sessionView(alsoMine).instance, 'the same credential through the same exit').to.not.equal(inst);
      expect(r.pool.views.sessionView(bystander).instance, 'another credential’s session stays').to.equal(inst);
      // Over its budget: weighs nothing against the exit, and still moves.
      const other = r.sessionOn(1);
      const second = await r.pool.reportFailure(other, 'captcha', '', token('alice'));
      expect(second).to.include({ scored: false, moved: true });
      expect(second.exit_ip).to.not.equal(r.instances.get(1)!.exitInfo.exitIp);
    });

    it('says when there is nowhere else to go, instead of rotating the instance under everyone else', async () => {
      const r = rig({ POOL_SIZE: '1' });
      const key = r.sessionOn(0);
      const answer = await r.pool.reportFailure(key, 'captcha', '', token('alice'));
      expect(answer).to.include({ moved: false, new_exit: false });
      expect(answer.exit_note).to.match(/no other instance/);
      expect(r.instances.get(0)!.rotations, 'no in-place rotation').to.equal(0);
      const stay = r.audit.recent(50).find((e) => e.type === 'assignment' && e.session === key);
      expect(stay?.details, 'the stay audited, from = to').to.include({ from: 0, to: 0, reason: 'report', new_exit: false });
      expect(stay?.message).to.match(/stays on instance 0 after its failure report/);
    });
  });

  describe('ban an exit for one site', () => {
    it('bans it for the site when complaints naming it reach QUARANTINE_FAILURES and the session reached the site through that exit; only that site’s complaints are settled', async () => {
      const r = rig();
      const inst = 0;
      const exit = r.fingerprintOn(inst);
      const [a, b, bystander] = [r.sessionOn(inst), r.sessionOn(inst), r.sessionOn(inst)];
      // Two clients of the site (a client's report moves all of its own sessions off the exit).
      r.visit(a, 'www.shop.example', 'token:alice');
      r.visit(b, 'shop.example', 'token:bob');
      r.visit(bystander, 'news.example', 'token:carol');
      await r.pool.reportFailure(a, 'captcha', '', token('alice'), 'shop.example');
      expect(r.exits.bannedFor({ fingerprint: exit, address: '' }, ['shop.example']), 'one captcha is not enough').to.equal(false);
      await r.pool.reportFailure(b, 'captcha', '', token('bob'), 'shop.example');
      expect(r.exits.bannedFor({ fingerprint: exit, address: '' }, ['shop.example'])).to.equal(true);
      expect(r.exits.bannedFor({ fingerprint: exit, address: '' }, []), 'not for everyone').to.equal(false);
      expect(r.health.get(inst)!.settledSites).to.deep.equal(['shop.example']);
      expect(r.pool.views.sessionView(bystander).instance, 'a session of another site keeps the exit').to.equal(inst);
    });

    it('counts a site reached by a connection still open (its start is the evidence): a client reports while its tunnel is up', async () => {
      const r = rig();
      const inst = 0;
      const exit = r.fingerprintOn(inst);
      const [a, b] = [r.sessionOn(inst), r.sessionOn(inst)];
      // No close record yet: only the connections' starts reached the supervisor.
      r.pool.recordReached([
        { key: a, instance: inst, host: 'shop.example', credential: 'token:alice', at: r.clock.t },
        { key: b, instance: inst, host: 'www.shop.example', credential: 'token:bob', at: r.clock.t },
      ]);
      await r.pool.reportFailure(a, 'captcha', '', token('alice'), 'shop.example');
      await r.pool.reportFailure(b, 'captcha', '', token('bob'), 'shop.example');
      expect(r.exits.bannedFor({ fingerprint: exit, address: '' }, ['shop.example'])).to.equal(true);
      const audited = r.audit.recent(50).filter((e) => e.message.startsWith('failure reported'));
      expect(audited.map((e) => e.details.site_seen)).to.deep.equal([true, true]);
    });

    it('bans nothing for a site the session never reached through that exit', async () => {
      const r = rig();
      const inst = 0;
      const exit = r.fingerprintOn(inst);
      const keys = [r.sessionOn(inst), r.sessionOn(inst), r.sessionOn(inst)];
      for (const k of keys) r.visit(k, 'news.example', 'token:alice');
      for (const k of keys) await r.pool.reportFailure(k, 'captcha', '', token('alice'), 'shop.example');
      expect(r.exits.bannedFor({ fingerprint: exit, address: '' }, ['shop.example'])).to.equal(false);
      expect(r.exits.bans.size).to.equal(0);
      expect(r.health.get(inst)!.settledSites).to.deep.equal([]);
      const audited = r.audit.recent(50).filter((e) => e.message.startsWith('failure reported'));
      expect(audited.every((e) => e.details.site_seen === false)).to.equal(true);
    });
  });

  describe('ban an exit for everyone', () => {
    it('bans it on the complaints of two independent parties; two tokens of one owner are one party', async () => {
      const r = rig();
      const inst = r.instanceOnExit('a');
      const exit = fp('a');
      const report = async (id: string): Promise<void> => {
        const key = r.sessionOn(inst);
        await r.pool.reportFailure(key, 'captcha', '', token(id));
      };
      await report('alice');
      await report('carol');
      expect(r.exits.bannedFor({ fingerprint: exit, address: '' }, []), 'acme twice is acme').to.equal(false);
      await report('bob');
      expect(r.exits.bannedFor({ fingerprint: exit, address: '' }, []), 'acme and globex').to.equal(true);
      expect(r.instances.get(inst)!.rotations, 'its instance moves to another exit').to.be.at.least(1);
      const ban = r.exits.bans.list(r.clock.t).find((b) => b.fingerprint === exit)!;
      expect(ban.reason).to.match(/2 independent reporters \(owner:acme, owner:globex\)/);
    });

    it('never on the operator’s own tokens and sign-ins alone, however many', async () => {
      const r = rig();
      const inst = r.instanceOnExit('a');
      for (const reporter of [token('ops'), { kind: 'sign-in', user: 'admin' } as const, token('ops')]) await r.pool.reportFailure(r.sessionOn(inst), 'blocked', '', reporter);
      expect(r.exits.bans.size).to.equal(0);
    });

    it('withholds a ban that would leave a country without an eligible exit, and says so', async () => {
      const r = rig();
      const inst = 0;
      r.exits.release(inst);
      r.pin(inst, ['fr']);
      expect(r.fingerprintOn(inst), 'instance 0 leaves through the one exit in fr').to.equal(fp('e'));
      for (const id of ['alice', 'bob']) await r.pool.reportFailure(r.sessionOn(inst), 'captcha', '', token(id));
      expect(r.exits.bannedFor({ fingerprint: fp('e'), address: '' }, [])).to.equal(false);
      const withheld = r.audit.recent(50).find((e) => e.details.reason === 'ban_withheld');
      expect(withheld?.message ?? '').to.match(/MIN_ELIGIBLE_EXITS_PER_COUNTRY/);
    });

    it('withholds a ban beyond a credential’s CLIENT_BAN_BUDGET', async () => {
      const r = rig({ CLIENT_BAN_BUDGET: '1/1h' });
      const onA = r.instanceOnExit('a');
      for (const id of ['alice', 'bob']) await r.pool.reportFailure(r.sessionOn(onA), 'captcha', '', token(id));
      expect(r.exits.bannedFor({ fingerprint: fp('a'), address: '' }, [])).to.equal(true);
      const onC = r.instanceOnExit('c');
      for (const id of ['alice', 'bob']) await r.pool.reportFailure(r.sessionOn(onC), 'captcha', '', token(id));
      expect(r.exits.bannedFor({ fingerprint: fp('c'), address: '' }, []), 'alice and bob spent their one ban').to.equal(false);
      expect(r.audit.recent(50).some((e) => e.details.reason === 'ban_withheld' && /CLIENT_BAN_BUDGET/.test(e.message))).to.equal(true);
    });

    it('says once an hour when bans per hour pass BAN_RATE_ALERT', async () => {
      const r = rig({ BAN_RATE_ALERT: '1' });
      for (const c of ['a', 'c']) {
        const inst = r.instanceOnExit(c);
        for (const id of ['alice', 'bob']) await r.pool.reportFailure(r.sessionOn(inst), 'captcha', '', token(id));
      }
      expect(r.exits.bans.size).to.equal(2);
      const alerts = r.audit.recent(200).filter((e) => e.details.reason === 'ban_rate');
      expect(alerts, 'the second ban passes 1 per hour; said once').to.have.length(1);
      expect(alerts[0]!.details).to.include({ bans_last_hour: 2, threshold: 1 });
    });
  });

  describe('quarantine an instance', () => {
    it('on one party’s complaints: no ban, the exit suspect (chosen last), its sessions moved', async () => {
      const r = rig();
      const inst = r.instanceOnExit('b');
      const key = r.sessionOn(inst);
      await r.pool.reportFailure(key, 'captcha', '', token('alice'));
      r.health.get(inst)!.emit('quarantine', 'score');
      expect(r.exits.bans.size).to.equal(0);
      expect(r.exits.isSuspect(fp('b'))).to.equal(true);
      // With a free exit that is not suspect, a new choice takes that one.
      r.exits.release(inst);
      const next = r.exits.next(inst, { fresh: false, why: 'test' });
      expect(next.ok && next.relay.fingerprint).to.not.equal(fp('b'));
    });
  });

  describe('the pool’s own evidence that an exit is dead', () => {
    /** Sessions on `inst` (placed there), and one elsewhere that must not move. */
    const sessions = (r: ReturnType<typeof rig>, inst: number, n: number): string[] => Array.from({ length: n }, () => r.sessionOn(inst));

    it('marks the exit down (not banned), moves its sessions to live exits as exit_down, re-routes open dials and re-pins the instance', async () => {
      const r = rig();
      const inst = r.instanceOnExit('a');
      const keys = sessions(r, inst, 3);
      const bystander = r.sessionOn(inst === 0 ? 1 : 0);
      const bystanderInstance = r.pool.views.sessionView(bystander).instance;
      const down: number[] = [];
      r.pool.on('instance-down', (id) => down.push(id));
      const onInstance = r.pool.sessions.keysOn(inst);
      expect(onInstance).to.include.members(keys);
      r.instances.get(inst)!.exitDied(fp('a'));
      expect(r.exits.isDown(fp('a'))).to.equal(true);
      expect(r.exits.bans.size, 'a dead relay is not a burnt address').to.equal(0);
      for (const key of keys) {
        const v = r.pool.views.sessionView(key);
        expect(v.instance, key).to.not.equal(inst);
        expect(v.exit_ip).to.not.equal('10.1.0.1');
      }
      expect(r.pool.views.sessionView(bystander).instance, 'another instance’s session stays').to.equal(bystanderInstance);
      const moves = r.audit.recent(200).filter((e) => e.type === 'assignment' && e.details.reason === 'exit_down');
      expect(moves.map((e) => e.session).sort()).to.deep.equal([...onInstance].sort());
      expect(down).to.deep.equal([inst]);
      expect(r.instances.get(inst)!.rotations, 'pinned to a new exit').to.equal(1);
      await new Promise((resolve) => setImmediate(resolve));
      expect(r.audit.recent(200).some((e) => e.type === 'rotate' && e.instance === inst && e.details.by === 'exit_down')).to.equal(true);
      // Charged to no one: nothing weighed on the instance, no budget spent.
      expect(r.health.get(inst)!.failures).to.deep.equal([]);
      expect(r.health.get(inst)!.state).to.equal('healthy');
      expect(r.exits.downViews().map((d) => [d.fingerprint, d.instance, d.evidence.length])).to.deep.equal([[fp('a'), inst, 1]]);
    });

    it('keeps the sessions it moved on their live exits: no rebalance changes them again', () => {
      const r = rig();
      const inst = r.instanceOnExit('a');
      const keys = sessions(r, inst, 4);
      r.instances.get(inst)!.exitDied(fp('a'));
      const placed = keys.map((k) => r.pool.views.sessionView(k).instance);
      r.instances.get(inst)!.finishRotation('10.5.0.1');
      for (let i = 0; i < 3; i++) r.pool.tick();
      expect(keys.map((k) => r.pool.views.sessionView(k).instance)).to.deep.equal(placed);
    });

    it('quarantines an instance on probation (its remediation gave it an exit that does not work); the ladder, not the pool, re-pins it', () => {
      const r = rig();
      const inst = r.instanceOnExit('b');
      const keys = sessions(r, inst, 2);
      r.health.get(inst)!.state = 'probation';
      r.instances.get(inst)!.exitDied(fp('b'));
      expect(r.health.get(inst)!.state).to.equal('quarantined');
      expect(r.instances.get(inst)!.rotations, 'the remediation ladder gives it its next exit').to.equal(0);
      expect(keys.every((k) => r.pool.views.sessionView(k).instance !== inst)).to.equal(true);
      const reasons = r.audit.recent(200).filter((e) => e.type === 'assignment' && e.details.reason !== 'new' && keys.includes(e.session ?? '')).map((e) => e.details.reason);
      expect(reasons).to.deep.equal(['exit_down', 'exit_down']);
      expect(r.exits.isDown(fp('b'))).to.equal(true);
    });

    it('with nowhere else to go, the sessions stay, the audit says why, and the instance gets a new exit', () => {
      const r = rig({ POOL_SIZE: '1' });
      const keys = sessions(r, 0, 2);
      const exit = r.fingerprintOn(0);
      r.instances.get(0)!.exitDied(exit);
      expect(keys.every((k) => r.pool.views.sessionView(k).instance === 0)).to.equal(true);
      const stays = r.audit.recent(200).filter((e) => e.type === 'assignment' && e.details.reason === 'exit_down');
      expect(stays.map((e) => e.session).sort()).to.deep.equal([...keys].sort());
      expect(stays[0]?.message).to.match(/its exit died/);
      expect(r.instances.get(0)!.rotations).to.equal(1);
    });
  });

  describe('blame a destination', () => {
    const failure = (r: ReturnType<typeof rig>, inst: number, key: string | null, reply: number, host = 'gone.example'): void =>
      r.pool.recordCloses(
        [
          {
            key,
            session: key === null ? null : r.pool.sessions.get(key)!.id,
            instance: inst,
            bytesUp: 0,
            bytesDown: 0,
            ok: false,
            failure: { kind: 'socks_refused', socksReply: reply, scored: true, destination: `${host}:443` },
            latencyMs: null,
            endedAt: r.clock.t,
            host,
            credential: 'token:alice',
          },
        ],
        1,
      );
    const settle = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 5));

    it('never counts a failure that fails the same way through another exit, nor one nobody could check', async () => {
      const same = rig({}, () => ({ ok: false, socksReply: 4 }));
      const faults: number[] = [];
      same.pool.on('destination-fault', () => faults.push(1));
      failure(same, 0, null, 4);
      await settle();
      expect(same.probes).to.have.length(1);
      expect(same.health.get(0)!.failures.at(-1)).to.include({ scored: false });
      expect(faults).to.have.length(1);
      const nobody = rig({}, () => null);
      failure(nobody, 0, null, 1);
      await settle();
      expect(nobody.health.get(0)!.failures.at(-1)).to.include({ scored: false });
    });

    it('blames the exit when the destination works through another, on the connection credential’s budget', async () => {
      const r = rig({ CLIENT_REPORT_BUDGET: '1/1m' }, () => ({ ok: true, socksReply: null }));
      failure(r, 0, null, 5, 'one.example');
      await settle();
      expect(r.health.get(0)!.failures.at(-1)).to.include({ scored: true });
      failure(r, 0, null, 5, 'two.example');
      await settle();
      expect(r.health.get(0)!.failures.at(-1), 'alice’s budget is spent').to.include({ scored: false });
    });

    it('excuses an exit policy refusal (reply 2) without a check', async () => {
      const r = rig({}, () => ({ ok: true, socksReply: null }));
      failure(r, 0, null, 2);
      await settle();
      expect(r.probes).to.have.length(0);
      expect(r.health.get(0)!.failures.at(-1)).to.include({ scored: false });
    });
  });

  describe('a failed egress probe (the pool’s own evidence about the exit)', () => {
    const probeFailure = (instance: number, fingerprint: string, echoAnswered: boolean) => ({ instance, fingerprint, failure: 'timeout', detail: 'no answer', echoAnswered, at: 1 });

    it('weighs a transport failure on the instance when the echo service answered through another exit', () => {
      const r = rig();
      r.exits.emit('egress-failed', probeFailure(2, r.fingerprintOn(2), true));
      expect(r.health.get(2)!.failures).to.deep.equal([{ kind: 'transport', source: 'transport', scored: true }]);
      for (const id of [0, 1, 3]) expect(r.health.get(id)!.failures, `instance ${id}`).to.deep.equal([]);
    });

    it('blames nobody when the echo service answered through no other exit (it may be down itself)', () => {
      const r = rig();
      r.exits.emit('egress-failed', probeFailure(2, r.fingerprintOn(2), false));
      expect(r.health.get(2)!.failures).to.deep.equal([]);
    });
  });
});

describe('verdicts: the evidence kept', () => {
  it('matches a site by name and its subdomains, never by another name or an IP literal', () => {
    expect(hostIsSite('shop.example', 'shop.example')).to.equal(true);
    expect(hostIsSite('WWW.Shop.Example', 'shop.example')).to.equal(true);
    expect(hostIsSite('notshop.example', 'shop.example')).to.equal(false);
    expect(hostIsSite('shop.example', 'www.shop.example')).to.equal(false);
    expect(hostIsSite('93.184.215.14', 'shop.example')).to.equal(false);
  });

  it('remembers visits per session, bounded, and finds sessions by credential and exit', () => {
    const log = new VisitLog();
    for (let i = 0; i < 40; i++) log.record('k', { host: `h${i}.example`, exit: 'X', credential: 'token:a', at: i });
    expect(log.visited('k', 'X', 'h39.example', 0)).to.equal(true);
    expect(log.visited('k', 'X', 'h0.example', 0), 'the oldest are forgotten').to.equal(false);
    log.record('other', { host: 'h1.example', exit: 'X', credential: 'token:b', at: 50 });
    expect(log.sessionsUsing('token:a', 'X', 0)).to.deep.equal(['k']);
    expect(log.sessionsVisiting('X', 'h1.example', 0)).to.deep.equal(['other']);
    log.forget('k');
    expect(log.sessionsUsing('token:a', 'X', 0)).to.deep.equal([]);
  });

  it('keeps complaints per exit: weight per site, parties, and settles one site without the others', () => {
    const c = new ExitComplaints();
    c.add('X', { party: 'p1', credential: 'token:a', kind: 'captcha', weight: 2.5, domain: 'shop.example', at: 10 });
    c.add('X', { party: 'p1', credential: 'token:a', kind: 'blocked', weight: 1.75, domain: '', at: 11 });
    c.add('X', { party: 'p2', credential: 'token:b', kind: 'captcha', weight: 2.5, domain: 'shop.example', at: 12 });
    expect(c.siteWeight('X', 'shop.example', 0)).to.equal(5);
    expect([...c.parties('X', 0)].sort()).to.deep.equal(['p1', 'p2']);
    expect([...c.parties('X', 12)]).to.deep.equal(['p2']);
    c.settleSite('X', 'shop.example');
    expect(c.recent('X', 0).map((x) => x.domain)).to.deep.equal(['']);
  });

  it('resolves parties: owners, the operator, address blocks', () => {
    const partyOf = partyResolver((id) => OWNERS.get(id) ?? null);
    expect(partyOf('token:alice')).to.equal(partyOf('token:carol'));
    expect(partyOf('token:alice')).to.not.equal(partyOf('token:bob'));
    expect(partyOf('token:ops')).to.equal(partyOf('sign-in:admin'));
    expect(partyOf('token:unknown')).to.equal('operator');
    expect(partyOf('address:192.0.2.1')).to.equal(partyOf('address:192.0.2.200'));
    expect(partyOf('address:192.0.2.1')).to.not.equal(partyOf('address:198.51.100.1'));
  });
});
