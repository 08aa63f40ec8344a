/**
 * A fleet that a lost Redis or a stolen hop secret does not open (issue 35), against a real
 * redis-server on loopback: the fleet's epoch, a node's standing after Redis lost its data,
 * revocations that stay revoked, the operator's re-seed, hop keys, and budgets counted across
 * the fleet.
 */
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { createHash, randomUUID } from 'node:crypto';
import { hopPassword, verifyHopPassword } from '../../shared/auth/hop-credential.js';
import { AuditLog } from '../../supervisor/audit/audit-log.js';
import type { StoredToken } from '../../supervisor/auth/auth-file.js';
import { decodeEpoch } from '../../supervisor/fleet/fleet-epoch.js';
import { FleetHopKeys } from '../../supervisor/fleet/fleet-hop-keys.js';
import { FleetMember, LEASE_RENEWALS_PER_TERM } from '../../supervisor/fleet/fleet-member.js';
import type { FleetPoolPort } from '../../supervisor/fleet/fleet-pool-port.js';
import { FleetDataLostError } from '../../supervisor/fleet/fleet-tokens.js';
import { startRedis, type RunningRedis } from '../support/processes/redis-server.js';
import { pollUntil } from '../support/waiting.js';
import { FLEET_TEST_LEASE_MS, MemoryDataDirs, MemoryTokenStore, memberOptions } from '../support/fakes/fleet-parts.js';

const LEASE_MS = FLEET_TEST_LEASE_MS;
const dataDirs = new MemoryDataDirs();
const RENEWAL_MS = LEASE_MS / LEASE_RENEWALS_PER_TERM;
const token = (id: string, createdAt = 1): StoredToken => ({ id, name: `token ${id}`, scope: 'proxy', digest: createHash('sha256').update(id).digest('hex'), createdAt });
const pool: FleetPoolPort = { sessionKeysUsedSince: () => [], giveUpSessions: () => undefined, holdsSession: () => false, nodeSummary: () => ({ routable: 0, sessions: 0, instances: [] }) };

describe('fleet security: epoch, revocations, re-seed, hop keys, budgets (a real redis-server on loopback)', function () {
  this.timeout(30_000);
  let redis: RunningRedis;
  let raw: Redis;
  let url = '';
  const members: FleetMember[] = [];
  const audits = new Map<FleetMember, AuditLog>();
  const join = async (node: string, reseed = '', port: FleetPoolPort = pool): Promise<FleetMember> => {
    const m = await FleetMember.join(memberOptions(url, node, dataDirs, { reseed }));
    members.push(m);
    const audit = new AuditLog();
    audits.set(m, audit);
    await m.attachPool(port, undefined, audit);
    return m;
  };
  const leave = async (m: FleetMember): Promise<void> => {
    members.splice(members.indexOf(m), 1);
    await m.leave();
  };
  const reasons = (m: FleetMember): unknown[] => (audits.get(m) as AuditLog).recent(100).map((e) => e.details.reason);

  before(async () => {
    redis = await startRedis();
    raw = new Redis(redis.url);
  });
  beforeEach(() => {
    url = `${redis.url}/sec-${Math.random().toString(36).slice(2, 8)}`;
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

  const prefix = (): string => `exitpool:${url.slice(url.lastIndexOf('/') + 1)}:`;

  it('the first node creates the fleet’s epoch, the next ones join it, and each remembers it', async () => {
    const a = await join('sec-a');
    const b = await join('sec-b');
    const epoch = decodeEpoch((await raw.get(`${prefix()}fleet:epoch`)) ?? '');
    expect(epoch?.continues).to.deep.equal([]);
    expect(a.epochText).to.equal(epoch?.id);
    expect(b.epochText).to.equal(a.epochText);
    expect(a.isMember && b.isMember).to.equal(true);
    expect(reasons(a)).to.include('fleet_created');
    expect(reasons(b)).to.include('fleet_joined');
  });

  it('a revoked token does not come back after Redis lost its data: the reproduction of issue 35', async () => {
    // Issue a token; B stops; A revokes it; Redis loses everything; B starts with its old auth.json.
    const a = await join('sec-a');
    const storeA = new MemoryTokenStore([token('keep'), token('stolen')]);
    await a.shareTokens(storeA);
    let b = await join('sec-b');
    await b.shareTokens(new MemoryTokenStore([]));
    await leave(b);
    storeA.revoke('stolen');
    await a.tokens.revoked('stolen');
    await raw.flushall();
    // A notices at its next renewal: not a member any more, said once, audited; its revocations told again.
    await pollUntil('node A sees the loss', async () => (a.isMember ? undefined : true), 4 * RENEWAL_MS, 20);
    expect(reasons(a)).to.include('fleet_data_lost');
    await pollUntil('A told its revocations again', async () => ((await raw.sismember(`${prefix()}fleet:tokens-revoked`, 'stolen')) === 1 ? true : undefined), 4 * RENEWAL_MS, 20);
    b = await join('sec-b');
    const storeB = new MemoryTokenStore([token('keep'), token('stolen')]);
    await b.shareTokens(storeB);
    expect(b.isMember, 'B knows the epoch Redis lost').to.equal(false);
    expect(storeB.ids(), 'B learned the revocation A told').to.deep.equal(['keep']);
    expect(storeB.revokedIds()).to.include('stolen');
    // Nothing was brought into Redis: no token list, no bans, no hop keys, no new epoch.
    expect(await raw.exists(`${prefix()}fleet:tokens`, `${prefix()}fleet:bans`, `${prefix()}fleet:epoch`)).to.equal(0);
    expect(await raw.keys(`${prefix()}fleet:hop-keys:*`)).to.deep.equal([]);
    // A token cannot be issued meanwhile (it could not reach the other nodes).
    expect(await b.tokens.issued(token('new')).then(() => null, (e: unknown) => e)).to.be.instanceOf(FleetDataLostError);
    // A revocation made on B while lost reaches A all the same.
    storeB.revoke('keep');
    await b.tokens.revoked('keep');
    await pollUntil('A learns B’s revocation', async () => (storeA.ids().includes('keep') ? undefined : true), 4 * RENEWAL_MS, 20);
  });

  it('FLEET_RESEED naming the lost epoch re-seeds from that node; the others rejoin and bring what they know, but nothing revoked', async () => {
    const a = await join('sec-a');
    const b = await join('sec-b');
    const lost = a.epochText;
    const storeA = new MemoryTokenStore([token('fromA'), token('both')]);
    const storeB = new MemoryTokenStore([token('fromB'), token('both')]);
    await a.shareTokens(storeA);
    await b.shareTokens(storeB);
    await raw.flushall();
    await pollUntil('both see the loss', async () => (a.isMember || b.isMember ? undefined : true), 4 * RENEWAL_MS, 20);
    storeB.revoke('both');
    await b.tokens.revoked('both');
    // A wrong FLEET_RESEED does nothing: a restarted A is still not a member.
    await leave(a);
    let again = await join('sec-a', 'not-the-lost-epoch');
    expect(again.isMember).to.equal(false);
    await leave(again);
    again = await join('sec-a', lost);
    expect(again.isMember).to.equal(true);
    expect(reasons(again)).to.include('fleet_reseeded');
    const reseeded = decodeEpoch((await raw.get(`${prefix()}fleet:epoch`)) ?? '');
    expect(reseeded?.continues).to.deep.equal([lost]);
    const storeA2 = new MemoryTokenStore(storeA.tokens.map((t) => t));
    await again.shareTokens(storeA2);
    expect(storeA2.ids(), 'B’s revocation made while lost holds on the re-seeded fleet').to.deep.equal(['fromA']);
    // B rejoins at its next renewal and brings its own tokens (none revoked anywhere).
    await pollUntil('B rejoins', async () => (b.isMember ? true : undefined), 4 * RENEWAL_MS, 20);
    expect(reasons(b)).to.include('fleet_rejoined');
    await pollUntil('each node serves the union of what they knew, without the revoked one', async () => (storeA2.ids().join() === 'fromA,fromB' && storeB.ids().join() === 'fromA,fromB' ? true : undefined), 4 * RENEWAL_MS, 20);
    expect(Object.keys(await raw.hgetall(`${prefix()}fleet:tokens`)).sort()).to.deep.equal(['fromA', 'fromB']);
  });

  it('a Redis holding another fleet’s epoch is not joined: the node stays apart until re-seeded', async () => {
    const a = await join('sec-a');
    await raw.set(`${prefix()}fleet:epoch`, '20990101T000000Z-SomeoneElse');
    await pollUntil('A sees an epoch it does not know', async () => (a.isMember ? undefined : true), 4 * RENEWAL_MS, 20);
    await raw.set(`${prefix()}fleet:epoch`, 'not an epoch \u0000');
    await leave(a);
    const back = await join('sec-a');
    expect(back.isMember).to.equal(false);
  });

  it('hop keys: published while a member, a grant verifies only on its owner, and survive a loss between nodes that knew each other', async () => {
    const a = await join('sec-a');
    const b = await join('sec-b');
    await pollUntil('A learns B’s keys', async () => (a.sessions.hop.canReach('sec-b') ? true : undefined), 4 * RENEWAL_MS, 20);
    const grant = a.sessions.hop.grant('sec-b', 'crawl-7');
    expect(grant).to.not.equal(null);
    const password = hopPassword(grant!, 'token:tok1');
    const ownKeys = new Map(b.hopKeys.snapshot().keys.map((k) => [k.id, k.secret]));
    expect(verifyHopPassword(password, { node: 'sec-b', sessionKey: 'crawl-7', keys: ownKeys, now: Date.now() })).to.deep.equal({ ok: true, from: 'sec-a', credential: 'token:tok1' });
    expect(verifyHopPassword(password, { node: 'sec-b', sessionKey: 'crawl-8', keys: ownKeys, now: Date.now() }).ok, 'another session').to.equal(false);
    const aKeys = new Map(a.hopKeys.snapshot().keys.map((k) => [k.id, k.secret]));
    expect(verifyHopPassword(password, { node: 'sec-a', sessionKey: 'crawl-7', keys: aKeys, now: Date.now() }).ok, 'another node').to.equal(false);
    // Redis loses its data: nothing is published again, but A still reaches B (same process).
    await raw.flushall();
    await pollUntil('both apart', async () => (a.isMember || b.isMember ? undefined : true), 4 * RENEWAL_MS, 20);
    await new Promise((resolve) => setTimeout(resolve, 2 * RENEWAL_MS));
    expect(await raw.keys(`${prefix()}fleet:hop-keys:*`)).to.deep.equal([]);
    expect(a.sessions.hop.canReach('sec-b')).to.equal(true);
    // B restarts (new keys, never published while Redis holds no fleet): A cannot sign for it, rather than sign with dead keys.
    await leave(b);
    const b2 = await join('sec-b');
    expect(b2.isMember).to.equal(false);
    await pollUntil('A sees B’s new process', async () => (a.sessions.hop.canReach('sec-b') ? undefined : true), 4 * RENEWAL_MS, 20);
    expect(a.sessions.hop.grant('sec-b', 'crawl-7')).to.equal(null);
  });

  it('a node publishes its hop keys before its address, so that a peer that sees it alive can reach it (after an outage had both lapse)', async () => {
    const a = await join('sec-a');
    await pollUntil('A a member', async () => (a.isMember ? true : undefined), 4 * RENEWAL_MS, 20);
    const monitor = await raw.monitor();
    const writes: string[] = [];
    monitor.on('monitor', (_time: string, args: string[]) => {
      const [command, key] = args;
      if (command?.toLowerCase() === 'set' && (key === `${prefix()}fleet:hop-keys:sec-a` || key === `${prefix()}fleet:address:sec-a`)) writes.push(key.includes('hop-keys') ? 'hop-keys' : 'address');
    });
    try {
      // As after an outage longer than the lease: both lapsed in Redis, then A's next renewals.
      await raw.del(`${prefix()}fleet:hop-keys:sec-a`, `${prefix()}fleet:address:sec-a`);
      await pollUntil('two renewals of A seen', async () => (writes.length >= 4 ? writes : undefined), 6 * RENEWAL_MS, 20);
    } finally {
      monitor.disconnect();
    }
    for (let i = 0; i + 1 < writes.length; i += 2) expect(writes.slice(i, i + 2), JSON.stringify(writes)).to.deep.equal(['hop-keys', 'address']);
  });

  it('a copy of a session another node owns is kept while that node cannot be reached, and given up once it can, used again or not', async () => {
    // The copy: served here once (just after the join), by a pool that holds it until it gives it up.
    let usedAt = 0;
    const givenUp: { key: string; owner: string }[] = [];
    const holding: FleetPoolPort = {
      ...pool,
      sessionKeysUsedSince: (since) => (usedAt >= since ? ['served-twice'] : []),
      giveUpSessions: (sessions) => void givenUp.push(...sessions),
      holdsSession: (key) => key === 'served-twice' && givenUp.length === 0,
    };
    // The owner, written straight into Redis: alive (its address) and owning the name, but its
    // process and hop keys not published yet, as after an outage before its first renewal.
    const owner = 'sec-owner';
    await raw.set(`${prefix()}fleet:address:${owner}`, '127.0.0.1:9', 'PX', 60_000);
    await raw.set(`${prefix()}fleet:session:served-twice`, owner, 'PX', 60_000);
    const a = await join('sec-a', '', holding);
    usedAt = Date.now();
    await new Promise((resolve) => setTimeout(resolve, 3 * RENEWAL_MS));
    expect(a.sessions.hop.canReach(owner)).to.equal(false);
    expect(givenUp, 'kept: giving it up would only start it again here').to.deep.equal([]);
    // The owner renews: A gives the copy up at its next renewal, though nobody used the name since.
    const process = `${owner}/4242/${randomUUID()}`;
    await raw.set(`${prefix()}fleet:node:${owner}`, process, 'PX', 60_000);
    await raw.set(`${prefix()}fleet:hop-keys:${owner}`, new FleetHopKeys(owner, LEASE_MS).publication(process), 'PX', 60_000);
    await pollUntil('A gives its copy up', async () => (givenUp.length > 0 ? true : undefined), 4 * RENEWAL_MS, 20);
    expect(givenUp).to.deep.equal([{ key: 'served-twice', owner }]);
    expect(await raw.get(`${prefix()}fleet:session:served-twice`), 'the owner keeps it').to.equal(owner);
  });

  it('budgets are counted across the fleet: N nodes spend one budget, and each counts alone while Redis is away', async () => {
    const a = await join('sec-a');
    const b = await join('sec-b');
    const limit = { attempts: 6, windowMs: 60_000 };
    const onA = a.budgets.counterFor('report', limit);
    const onB = b.budgets.counterFor('report', limit);
    const now = Date.now();
    let taken = 0;
    // Alternating nodes, each spend flushed before the next (the way reports through an API arrive).
    for (let i = 0; i < 20; i++) {
      if ((i % 2 === 0 ? onA : onB).take('token:t1', now)) taken++;
      await a.budgets.flush();
      await b.budgets.flush();
    }
    // One unit beyond the budget per other node: each node's view lags the other's last spend until its own is answered.
    expect(taken).to.be.within(limit.attempts, limit.attempts + 1);
    expect(onA.wouldAllow('token:t1', now) || onB.wouldAllow('token:t1', now)).to.equal(false);
    expect(onA.take('token:other', now), 'another credential has its own').to.equal(true);
    // Redis away: each node counts alone from what it knew.
    await redis.pause();
    try {
      const fresh = 'token:t2';
      let away = 0;
      for (let i = 0; i < 20; i++) if ((i % 2 === 0 ? onA : onB).take(fresh, now)) away++;
      expect(away, 'at most one budget per node').to.equal(2 * limit.attempts);
    } finally {
      await redis.resume();
    }
    await a.budgets.flush();
    await b.budgets.flush();
    const key = (await raw.keys(`${prefix()}fleet:budget:report:*:token:t2`))[0] as string;
    expect(Number(await raw.get(key)), 'what was spent meanwhile is added once Redis answers').to.equal(2 * limit.attempts);
  });
});
