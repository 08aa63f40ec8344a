/**
 * The fleet's leases against a real redis-server on loopback: node names, exit leases claimed,
 * yielded, released and lapsed, and the exits another node holds kept out of every choice here.
 */
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { createHash } from 'node:crypto';
import { AuditLog } from '../../supervisor/audit/audit-log.js';
import type { StoredToken } from '../../supervisor/auth/auth-file.js';
import { ExitAssignments } from '../../supervisor/exits/exit-assignments.js';
import { asPublished, type ExitRelay } from '../../supervisor/exits/exit-relay.js';
import { FleetMember } from '../../supervisor/fleet/fleet-member.js';
import { StartupError } from '../../supervisor/startup/startup-error.js';
import { logger } from '../../shared/logger.js';
import { FLEET_TEST_LEASE_MS, MemoryDataDirs, MemoryTokenStore, memberOptions } from '../support/fakes/fleet-parts.js';
import { startRedis, type RunningRedis } from '../support/processes/redis-server.js';
import { pollUntil } from '../support/waiting.js';

const LEASE_MS = FLEET_TEST_LEASE_MS;
const fp = (c: string): string => c.repeat(40).toUpperCase();

function relay(c: string, n: number): ExitRelay {
  return asPublished({ fingerprint: fp(c), nickname: `exit${c}`, address: `10.0.${n}.1`, country: 'de', bandwidth: 1000, block: `10.0.${n}.0/24`, family: fp(c) });
}

const CATALOG = ['a', 'b', 'c', 'd'].map((c, i) => relay(c, i));

function assignments(audit = new AuditLog()): ExitAssignments {
  const a = new ExitAssignments({ unit: 'relay', banTtlMs: 60_000, exitNodes: [], strictNodes: false, audit, log: logger(), random: () => 0 });
  a.catalog.replace(CATALOG, 1);
  return a;
}

const dataDirs = new MemoryDataDirs();

describe('fleet: node and exit leases on a shared Redis (a real redis-server on loopback)', function () {
  this.timeout(30_000);
  let redis: RunningRedis;
  let raw: Redis;
  const members: FleetMember[] = [];
  const join = async (node: string, pool = 'pool-a'): Promise<FleetMember> => {
    const m = await FleetMember.join(memberOptions(`${redis.url}/${pool}`, node, dataDirs));
    members.push(m);
    return m;
  };
  before(async () => {
    redis = await startRedis();
    raw = new Redis(redis.url);
  });
  afterEach(async () => {
    for (const m of members.splice(0)) await m.leave();
    await raw.flushall();
    dataDirs.clear();
  });
  after(async () => {
    raw.disconnect();
    await redis.stop();
  });

  it('keeps a node off the exits another node holds, and says who holds them', async () => {
    const a = await join('node-a');
    const exitsA = assignments();
    await a.manageExits(exitsA);
    const first = exitsA.next(0, { fresh: false, why: 'bootstrap' });
    const second = exitsA.next(1, { fresh: false, why: 'bootstrap' });
    expect(first.ok && second.ok).to.equal(true);
    const heldByA = [...exitsA.heldFingerprints()].sort();
    await pollUntil('node-a leases its two exits', async () => (await raw.keys('exitpool:pool-a:fleet:exit:*')).length === 2 || undefined, 5_000, 20);
    for (const f of heldByA) expect(await raw.get(`exitpool:pool-a:fleet:exit:${f}`)).to.equal('node-a');

    const b = await join('node-b');
    const exitsB = assignments();
    await b.manageExits(exitsB);
    expect([...heldByA].map((f) => exitsB.holderOf(f))).to.deep.equal(['node-a', 'node-a']);
    // The same seeded choice node-a made first: node-b gets the two exits node-a left.
    const bFirst = exitsB.next(0, { fresh: false, why: 'bootstrap' });
    const bSecond = exitsB.next(1, { fresh: false, why: 'bootstrap' });
    const heldByB = [bFirst, bSecond].map((n) => (n.ok ? n.relay.fingerprint : ''));
    expect(heldByB.filter((f) => heldByA.includes(f)), 'no exit on both nodes').to.deep.equal([]);
    // Nothing left for a third instance on node-b: the other two are node-a's.
    const third = exitsB.next(2, { fresh: false, why: 'bootstrap' });
    expect(third.ok).to.equal(true); // a shortage shares one of node-b's own, never node-a's
    expect(third.ok && heldByA.includes(third.relay.fingerprint)).to.equal(false);
    expect(exitsB.eligibleCount()).to.equal(2);
    expect(b.view().nodes).to.deep.equal(['node-a', 'node-b']);
  });

  it('settles two nodes that pinned the same exit before either lease was seen: the later claim yields and its instances move', async () => {
    const exitsA = assignments();
    const auditB = new AuditLog();
    const exitsB = assignments(auditB);
    const moved: number[][] = [];
    exitsB.on('exit-gone', (ids) => moved.push(ids));
    // Both choose before joining: the same seeded choice, the same exit.
    const pickA = exitsA.next(0, { fresh: false, why: 'bootstrap' });
    const pickB = exitsB.next(3, { fresh: false, why: 'bootstrap' });
    expect(pickA.ok && pickB.ok && pickA.relay.fingerprint === pickB.relay.fingerprint).to.equal(true);
    const contested = pickA.ok ? pickA.relay.fingerprint : '';
    const a = await join('node-a');
    await a.manageExits(exitsA);
    const b = await join('node-b');
    await b.manageExits(exitsB);
    expect(moved).to.deep.equal([[3]]);
    expect(exitsB.holderOf(contested)).to.equal('node-a');
    expect(auditB.recent(10).some((e) => e.details?.reason === 'held_by_other_node' && e.details.node === 'node-a')).to.equal(true);
    // The move: node-b's next choice for that instance is another exit.
    const again = exitsB.next(3, { fresh: true, why: 'exit_gone' });
    expect(again.ok && again.relay.fingerprint !== contested).to.equal(true);
    expect(await raw.get(`exitpool:pool-a:fleet:exit:${contested}`)).to.equal('node-a');
  });

  it('leases the /24 an instance leaves from: no other node’s instance is given it while the catalog allows, a later claim yields, a shortage is said', async () => {
    // a and b leave from one /24 (b's traffic was measured there); c and d have their own.
    const subnetCatalog = [relay('a', 0), { ...relay('b', 1), address: '10.0.0.7', block: '10.0.0.0/24' }, relay('c', 2), relay('d', 3)];
    const subnet = (audit = new AuditLog(), order: ExitRelay[] = subnetCatalog): ExitAssignments => {
      const x = new ExitAssignments({ unit: 'subnet', banTtlMs: 60_000, exitNodes: [], strictNodes: false, audit, log: logger(), random: () => 0 });
      x.catalog.replace(order, 1);
      return x;
    };
    // Both nodes choose before either joins: node-a takes a, node-b (its catalog read in another order) b: one /24.
    const exitsA = subnet();
    const auditB = new AuditLog();
    const exitsB = subnet(auditB, [subnetCatalog[1], subnetCatalog[0], subnetCatalog[2], subnetCatalog[3]] as ExitRelay[]);
    const moved: number[][] = [];
    exitsB.on('exit-gone', (ids) => moved.push(ids));
    const pickA = exitsA.next(0, { fresh: false, why: 'bootstrap' });
    const pickB = exitsB.next(5, { fresh: false, why: 'bootstrap' });
    expect([pickA.ok && pickA.relay.fingerprint, pickB.ok && pickB.relay.fingerprint]).to.deep.equal([fp('a'), fp('b')]);
    const a = await join('node-a');
    await a.manageExits(exitsA);
    expect(await raw.get('exitpool:pool-a:fleet:unit:block:10.0.0.0/24')).to.equal('node-a');
    const b = await join('node-b');
    await b.manageExits(exitsB);
    expect(moved, 'the later claim yields: its instance moves').to.deep.equal([[5]]);
    expect(exitsB.unitHolderOf('block:10.0.0.0/24')).to.equal('node-a');
    expect(auditB.recent(10).some((e) => e.details?.reason === 'unit_held_by_other_node' && e.details.node === 'node-a')).to.equal(true);
    // From now on node-b's choices keep off that /24: c and d, then a shortage, said and never leased.
    const again = exitsB.next(5, { fresh: true, why: 'exit_gone' });
    const next = exitsB.next(6, { fresh: false, why: 'bootstrap' });
    expect([again, next].map((n) => (n.ok ? n.relay.fingerprint : ''))).to.deep.equal([fp('c'), fp('d')]);
    expect(exitsB.distinctCapacity()).to.equal(2);
    const short = exitsB.next(7, { fresh: false, why: 'bootstrap' });
    expect(short).to.deep.include({ ok: true, distinct: false });
    expect(exitsB.shortageOf(7)).to.match(/on this node or another of the fleet/);
    await pollUntil('node-b leases its two /24s', async () => ((await raw.keys('exitpool:pool-a:fleet:unit:*')).length === 3 ? true : undefined), 5_000, 20);
    expect((await raw.mget('exitpool:pool-a:fleet:unit:block:10.0.2.0/24', 'exitpool:pool-a:fleet:unit:block:10.0.3.0/24'))).to.deep.equal(['node-b', 'node-b']);
    // A node that leaves gives its /24s back at once.
    await a.leave();
    members.splice(members.indexOf(a), 1);
    expect(await raw.exists('exitpool:pool-a:fleet:unit:block:10.0.0.0/24')).to.equal(0);
  });

  it('releases an exit the node no longer uses, and all of them when it leaves', async () => {
    const a = await join('node-a');
    const exitsA = assignments();
    await a.manageExits(exitsA);
    const pick = exitsA.next(0, { fresh: false, why: 'bootstrap' });
    const f = pick.ok ? pick.relay.fingerprint : '';
    await pollUntil('leased', async () => (await raw.get(`exitpool:pool-a:fleet:exit:${f}`)) === 'node-a' || undefined, 5_000, 20);
    exitsA.release(0);
    await pollUntil('released with the assignment', async () => (await raw.exists(`exitpool:pool-a:fleet:exit:${f}`)) === 0 || undefined, 5_000, 20);
    exitsA.next(1, { fresh: false, why: 'bootstrap' });
    await pollUntil('leased again', async () => (await raw.keys('exitpool:pool-a:fleet:exit:*')).length === 1 || undefined, 5_000, 20);
    await a.leave();
    members.splice(members.indexOf(a), 1);
    // Only the fleet's epoch stays: no lease of node-a's, nor its address or hop keys.
    expect(await raw.keys('exitpool:pool-a:fleet:*')).to.deep.equal(['exitpool:pool-a:fleet:epoch']);
  });

  it('forgets the exits of a node that stopped renewing once its leases lapse', async () => {
    const b = await join('node-b');
    const exitsB = assignments();
    // A node that died: its lease was set and never renewed.
    await raw.set(`exitpool:pool-a:fleet:exit:${fp('a')}`, 'node-gone', 'PX', 600);
    await b.manageExits(exitsB);
    expect(exitsB.holderOf(fp('a'))).to.equal('node-gone');
    expect(exitsB.eligibleCount()).to.equal(3);
    await pollUntil('the lapsed lease forgotten at a renewal', async () => (exitsB.holderOf(fp('a')) === undefined ? true : undefined), 5_000, 50);
    expect(exitsB.eligibleCount()).to.equal(4);
  });

  it('refuses a second process under a node name in use (after waiting one lease), and lets a name go at once on leave', async () => {
    await join('node-a');
    const started = Date.now();
    const refused = await join('node-a').then(
      () => null,
      (e: unknown) => e,
    );
    expect(refused).to.be.instanceOf(StartupError);
    expect((refused as StartupError).setting).to.equal('NODE_NAME');
    expect((refused as Error).message).to.match(/another running exitpool holds node name "node-a" on redis:\/\/127\.0\.0\.1:\d+\/pool-a/);
    expect(Date.now() - started, 'waited for the lease to lapse first').to.be.at.least(LEASE_MS);
    // Another pool on the same Redis is another fleet: the same name is free there.
    await join('node-a', 'other-pool');
    const first = members[0] as FleetMember;
    await first.leave();
    members.splice(0, 1);
    expect(await raw.exists('exitpool:pool-a:fleet:node:node-a'), 'a name given back is free at once').to.equal(0);
    await join('node-a');
  });

  it('takes over a node name whose process died once its lease lapses', async () => {
    await raw.set('exitpool:pool-a:fleet:node:node-a', 'node-a/1/dead', 'PX', 700);
    const t = Date.now();
    const m = await join('node-a');
    expect(Date.now() - t).to.be.at.least(500);
    expect(m.view().node).to.equal('node-a');
    expect(await raw.get('exitpool:pool-a:fleet:node:node-a')).to.match(/^node-a\/\d+\//);
  });

  it('gives a named session to the first node that serves it; the others forward to it while it lives, and take it over after', async () => {
    const a = await join('node-a');
    const b = await join('node-b');
    expect(await a.sessions.claim('crawl', false)).to.deep.equal({ kind: 'here' });
    expect(await a.sessions.claim('crawl', false), 'again: still here').to.deep.equal({ kind: 'here' });
    expect(await b.sessions.claim('crawl', false)).to.deep.equal({ kind: 'there', node: 'node-a', host: '127.0.0.1', port: 1080 });
    expect(b.sessions.rememberedOwner('crawl'), 'remembered: no Redis for the next connection').to.deep.equal({ node: 'node-a', host: '127.0.0.1', port: 1080 });
    // node-b read node-a's hop keys when it joined: it can sign a hop of "crawl" to node-a.
    expect(b.sessions.hop.canReach('node-a')).to.equal(true);
    expect(b.sessions.hop.grant('node-a', 'crawl')).to.include({ from: 'node-b' });
    // A forwarded connection is served where it lands, whoever the directory named.
    expect(await b.sessions.claim('other', false)).to.deep.equal({ kind: 'here' });
    expect(await a.sessions.claim('other', true)).to.deep.equal({ kind: 'taken', from: 'node-b' });
    // node-a gives "crawl" back (expired there): node-b starts it afresh.
    a.sessions.released('crawl');
    await pollUntil('released', async () => (await raw.exists('exitpool:pool-a:fleet:session:crawl')) === 0 || undefined, 5_000, 20);
    // node-a goes (its address leaves with it; its sessions stay its own in Redis): node-b forgets
    // it as an owner, and takes its session over.
    expect(await a.sessions.claim('orphan', false)).to.deep.equal({ kind: 'here' });
    expect(await b.sessions.claim('orphan', false)).to.include({ kind: 'there', node: 'node-a' });
    await a.leave();
    members.splice(members.indexOf(a), 1);
    expect(await raw.get('exitpool:pool-a:fleet:session:orphan')).to.equal('node-a');
    await pollUntil('node-b sees node-a gone', async () => (b.view().nodes.includes('node-a') ? undefined : true), 5_000, 50);
    expect(b.sessions.rememberedOwner('orphan')).to.equal(undefined);
    expect(await b.sessions.claim('orphan', false)).to.deep.equal({ kind: 'taken', from: 'node-a' });
    expect(await raw.get('exitpool:pool-a:fleet:session:orphan')).to.equal('node-b');
    expect(await raw.pttl('exitpool:pool-a:fleet:session:orphan'), 'ownership lapses unless renewed').to.be.within(1, 60_000 + LEASE_MS);
  });

  it('keeps hostile session keys inside their own Redis key, and serves here when Redis is away', async () => {
    const a = await join('node-a');
    for (const key of ['a b', 'x:*', '\r\n{}', 'é'.repeat(100), 'fleet:address:node-a']) {
      expect(await a.sessions.claim(key, false), key).to.deep.equal({ kind: 'here' });
      expect(await raw.get(`exitpool:pool-a:fleet:session:${key}`)).to.equal('node-a');
    }
    expect(await raw.get('exitpool:pool-a:fleet:address:node-a'), 'the address untouched').to.equal('127.0.0.1:1080');
    await redis.pause();
    try {
      expect(await a.sessions.claim('while-away', false)).to.deep.equal({ kind: 'here' });
    } finally {
      await redis.resume();
    }
  });

  it('shares issued tokens: brought in at join unless revoked, every change applied on every node, hostile records left out', async () => {
    const token = (id: string, createdAt: number): StoredToken => ({ id, name: `token ${id}`, scope: 'proxy', digest: createHash('sha256').update(id).digest('hex'), createdAt });
    const a = await join('node-a');
    const b = await join('node-b');
    const storeA = new MemoryTokenStore([token('fromA', 1)]);
    const storeB = new MemoryTokenStore([token('fromB', 2), token('oldB', 0)]);
    await a.shareTokens(storeA);
    // node-b joins with an auth.json holding a token revoked in the fleet meanwhile: it stays revoked, and node-b remembers it.
    storeA.revoke('oldB');
    await a.tokens.revoked('oldB');
    await b.shareTokens(storeB);
    expect(storeB.ids()).to.deep.equal(['fromA', 'fromB']);
    expect(storeB.revokedIds()).to.include('oldB');
    await b.tokens.issued(token('newB', 3));
    await pollUntil('node-a hears of node-b’s token', async () => (storeA.ids().includes('newB') ? true : undefined), 2_000, 10);
    storeA.revoke('fromB');
    await a.tokens.revoked('fromB');
    await pollUntil('node-b hears of the revocation', async () => (storeB.ids().includes('fromB') ? undefined : true), 2_000, 10);
    expect(storeB.revokedIds()).to.include('fromB');
    // Records that are not tokens (written by hand, or by something else) are left out, never applied.
    await raw.hset('exitpool:pool-a:fleet:tokens', 'bad1', 'not json', 'bad2', JSON.stringify({ ...token('bad2', 4), digest: 'xyz' }), 'bad3', JSON.stringify(token('other', 5)), 'bad4', JSON.stringify({ ...token('bad4', 6), extra: 1 }));
    await raw.sadd('exitpool:pool-a:fleet:tokens-revoked', 'not/an/id');
    await a.tokens.resync();
    expect(storeA.ids()).to.deep.equal(['fromA', 'newB']);
    expect(storeA.revokedIds(), 'an id of another shape is not remembered').to.not.include('not/an/id');
  });

  it('keeps a revocation made while Redis is away in force here, and tells the fleet once it answers', async () => {
    const token = (id: string): StoredToken => ({ id, name: id, scope: 'admin', digest: createHash('sha256').update(id).digest('hex'), createdAt: 1 });
    const a = await join('node-a');
    const store = new MemoryTokenStore([token('keep'), token('gone')]);
    await a.shareTokens(store);
    await redis.pause();
    try {
      store.revoke('gone');
      const error = await a.tokens.revoked('gone').then(() => null, (e: unknown) => e);
      expect(error).to.be.instanceOf(Error);
    } finally {
      await redis.resume();
    }
    await a.tokens.resync();
    expect(store.ids()).to.deep.equal(['keep']);
    expect(await raw.hexists('exitpool:pool-a:fleet:tokens', 'gone')).to.equal(0);
    expect(await raw.sismember('exitpool:pool-a:fleet:tokens-revoked', 'gone')).to.equal(1);
  });

  it('shares exit bans: one node’s ban is in force on the others at once, a lift too, and records that are not bans are left out', async () => {
    const a = await join('node-a');
    const b = await join('node-b');
    const exitsA = assignments();
    const exitsB = assignments();
    await a.manageExits(exitsA);
    await b.manageExits(exitsB);
    const burnt = exitsA.next(0, { fresh: false, why: 'bootstrap' });
    const f = burnt.ok ? burnt.relay.fingerprint : '';
    exitsA.banAssigned(0, 'captcha', 'two captchas', f);
    await pollUntil('node-b has node-a’s ban', async () => (exitsB.bannedFor(CATALOG.find((r) => r.fingerprint === f) as ExitRelay, []) ? true : undefined), 2_000, 10);
    // A ban for one site stays a ban for that site on the other node.
    exitsB.next(1, { fresh: false, why: 'bootstrap' });
    exitsB.banAssigned(1, 'blocked', 'blocked on one site', exitsB.current(1) ?? '', 'shop.example');
    const siteBanned = exitsB.current(1) ?? '';
    await pollUntil('node-a has the site ban', async () => (exitsA.bannedFor(CATALOG.find((r) => r.fingerprint === siteBanned) as ExitRelay, ['shop.example']) ? true : undefined), 2_000, 10);
    expect(exitsA.bannedFor(CATALOG.find((r) => r.fingerprint === siteBanned) as ExitRelay, []), 'for that site only').to.equal(false);
    // Lifted on node-b: lifted on node-a.
    expect(exitsB.liftBan(f)).to.equal(true);
    await pollUntil('node-a lifted it too', async () => (exitsA.bannedFor(CATALOG.find((r) => r.fingerprint === f) as ExitRelay, []) ? undefined : true), 2_000, 10);
    // Hostile records: not JSON, a key that does not match, a cause that is not one.
    await raw.hset('exitpool:pool-a:fleet:bans', 'x|', 'not json', `${fp('d')}|`, JSON.stringify({ fingerprint: fp('c'), address: '1.1.1.1', nickname: 'n', domain: '', cause: 'captcha', reason: '', since: 0, until: Date.now() + 60_000 }), `${fp('c')}|`, JSON.stringify({ fingerprint: fp('c'), address: '1.1.1.1', nickname: 'n', domain: '', cause: 'nope', reason: '', since: 0, until: Date.now() + 60_000 }));
    await a.bans.resync();
    expect(exitsA.bannedFor(CATALOG.find((r) => r.fingerprint === fp('c')) as ExitRelay, []), 'no hostile record applied').to.equal(false);
    expect(exitsA.bannedFor(CATALOG.find((r) => r.fingerprint === fp('d')) as ExitRelay, [])).to.equal(false);
  });

  it('refuses a start while Redis cannot be reached, naming the setting and not the password', async () => {
    const error = await FleetMember.join(memberOptions('redis://:s3cret@127.0.0.1:1/fleet', 'n', dataDirs)).then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).to.be.instanceOf(StartupError);
    expect((error as StartupError).setting).to.equal('STATE_STORE');
    expect((error as Error).message).to.not.include('s3cret');
  });
});
