import { expect } from 'chai';
import { Redis } from 'ioredis';
import { RedisStateStore, redisStateVersion, type RedisMigration } from '../../supervisor/state/redis-state-store.js';
import { emptyBatch, readWholeState, SESSION_SLICE_ROWS, StateOpenError, type StateOpenFailure, type StoredState } from '../../supervisor/state/state-store.js';
import { CONTRACT_CAPACITY, expectStoreRoundTrip } from '../support/state/store-contract.js';
import { fixtureRecords, redisFixture, writeV1RedisKeys, type FixtureRecords } from '../support/state/state-fixture.js';
import { startRedis, type RunningRedis } from '../support/processes/redis-server.js';

/** Every key under a prefix with its content, to show a refused open left it as it was. */
async function snapshot(raw: Redis, prefix: string): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  for (const k of (await raw.keys(`${prefix}*`)).sort()) {
    const type = await raw.type(k);
    out[k] = type === 'hash' ? await raw.hgetall(k) : type === 'zset' ? await raw.zrange(k, 0, -1, 'WITHSCORES') : await raw.get(k);
  }
  return out;
}

async function openFailure(store: RedisStateStore): Promise<StateOpenFailure> {
  try {
    await store.open();
  } catch (error) {
    expect(error).to.be.instanceOf(StateOpenError);
    return (error as StateOpenError).failure;
  } finally {
    await store.close();
  }
  throw new Error('the open did not fail');
}

/** What the store read, in records.json's shape. */
function asFixture(s: StoredState): Pick<FixtureRecords, 'records' | 'rings'> {
  const records: FixtureRecords['records'] = {};
  for (const [ns, m] of Object.entries(s.records)) if (m.size > 0) records[ns] = Object.fromEntries([...m].sort(([a], [b]) => (a < b ? -1 : 1)));
  const rings: FixtureRecords['rings'] = {};
  for (const [ring, l] of Object.entries(s.rings)) if (l.length > 0) rings[ring] = l;
  return { records, rings };
}

function sortedFixture(f: FixtureRecords): Pick<FixtureRecords, 'records' | 'rings'> {
  const records = Object.fromEntries(Object.entries(f.records).map(([ns, m]) => [ns, Object.fromEntries(Object.entries(m).sort(([a], [b]) => (a < b ? -1 : 1)))]));
  const rings = Object.fromEntries(Object.entries(f.rings).map(([r, l]) => [r, [...l].sort((a, b) => a.seq - b.seq)]));
  return { records, rings };
}

describe('durable state: the Redis store (a real redis-server on loopback)', function () {
  this.timeout(30_000);
  let redis: RunningRedis;
  let raw: Redis;
  before(async () => {
    redis = await startRedis();
    raw = new Redis(redis.url);
  });
  after(async () => {
    raw.disconnect();
    await redis.stop();
  });

  it('writes batches atomically and reads them back: upserts, deletes, whole namespaces, rings trimmed by count', async () => {
    await expectStoreRoundTrip(() => new RedisStateStore(`${redis.url}/roundtrip`));
  });

  it('hands the sessions over in slices (HSCAN), each key once', async () => {
    const n = 2 * SESSION_SLICE_ROWS + 3;
    const fields: string[] = [];
    for (let i = 0; i < n; i++) fields.push(`s${i}`, `v${i}`);
    const store = new RedisStateStore(`${redis.url}/slices`);
    await store.open();
    await raw.hset('exitpool:slices:rec:sessions', ...fields);
    const keys: string[] = [];
    let slices = 0;
    expect(await store.readSessions((rows) => (slices++, keys.push(...rows.keys)))).to.equal(n);
    expect(new Set(keys).size).to.equal(n);
    expect(slices).to.be.at.least(2);
    await store.close();
  });

  describe('what the prefix holds is judged before anything is written to it', () => {
    it('the committed format-version-1 keys: read whole, byte for byte', async () => {
      await writeV1RedisKeys(raw, 'exitpool:v1:');
      const store = new RedisStateStore(`${redis.url}/v1`);
      const s = await readWholeState(store);
      await store.close();
      expect(s.movedAside).to.equal(null);
      expect(s.migrated, 'version 1 is this release’s Redis format').to.equal(redisStateVersion() === 1 ? null : { from: 1, to: redisStateVersion() });
      expect(asFixture(s)).to.deep.equal(sortedFixture(fixtureRecords()));
    });

    it('every migration, from the version-1 keys in order, keeps every record (a test step stands in while there is none)', async () => {
      // A step that rewrites every session (as a real one might) and can run twice.
      const testStep = (to: number): RedisMigration => ({
        to,
        summary: 'test: every session value wrapped and unwrapped',
        async apply(r, key) {
          const all = await r.hgetall(key('rec', 'sessions'));
          for (const [k, v] of Object.entries(all)) await r.hset(key('rec', 'sessions'), k, JSON.stringify(JSON.parse(v)));
        },
      });
      const migrations = [...(await import('../../supervisor/state/redis-state-store.js')).REDIS_MIGRATIONS];
      migrations.push(testStep(migrations.length + 2));
      await writeV1RedisKeys(raw, 'exitpool:migrate:');
      const store = new RedisStateStore(`${redis.url}/migrate`, undefined, { migrations });
      const s = await readWholeState(store);
      await store.close();
      expect(s.migrated).to.deep.equal({ from: 1, to: migrations.length + 1 });
      expect(await raw.hget('exitpool:migrate:meta', 'version')).to.equal(String(migrations.length + 1));
      expect(asFixture(s)).to.deep.equal(sortedFixture(fixtureRecords()));
    });

    it('a migration that fails refuses the open and leaves the keys at their version', async () => {
      await writeV1RedisKeys(raw, 'exitpool:failing:');
      const before = await snapshot(raw, 'exitpool:failing:');
      const failing: RedisMigration = {
        to: 2,
        summary: 'test: fails',
        apply: () => Promise.reject(new Error('no room')),
      };
      const failure = await openFailure(new RedisStateStore(`${redis.url}/failing`, undefined, { migrations: [failing] }));
      expect(failure).to.deep.include({ kind: 'migration', from: 1, to: 2 });
      expect(await snapshot(raw, 'exitpool:failing:')).to.deep.equal(before);
    });

    const refusals: [string, (prefix: string) => Promise<void>, StateOpenFailure['kind']][] = [
      [
        'a newer format version',
        async (p) => {
          await writeV1RedisKeys(raw, p);
          await raw.hset(`${p}meta`, 'version', '99');
        },
        'newer',
      ],
      ['another program’s meta', (p) => raw.hset(`${p}meta`, 'format', 'something-else', 'version', '9').then(() => raw.hset(`${p}rec:sessions`, 'k', 'v')).then(() => undefined), 'foreign'],
      ['keys without a meta', (p) => raw.hset(`${p}rec:sessions`, 'k', 'v').then(() => undefined), 'foreign'],
    ];
    for (const [name, make, kind] of refusals) {
      it(`${name}: refused (${kind}), every key left as it was`, async () => {
        const prefix = `exitpool:refuse-${kind}-${name.length}:`;
        await make(prefix);
        const before = await snapshot(raw, prefix);
        const failure = await openFailure(new RedisStateStore(`${redis.url}/${prefix.split(':')[1] as string}`));
        expect(failure.kind).to.equal(kind);
        expect(await snapshot(raw, prefix)).to.deep.equal(before);
      });
    }

    const corrupt: [string, (prefix: string) => Promise<void>][] = [
      ['a record namespace that is not a hash', (p) => raw.del(`${p}rec:health`).then(() => raw.set(`${p}rec:health`, 'x')).then(() => undefined)],
      ['a sessions key that is not a hash', (p) => raw.del(`${p}rec:sessions`).then(() => raw.rpush(`${p}rec:sessions`, 'x')).then(() => undefined)],
      ['a version that is not one', (p) => raw.hset(`${p}meta`, 'version', 'one').then(() => undefined)],
    ];
    for (const [name, spoil] of corrupt) {
      it(`${name}: proven corrupt, renamed aside whole, and the store starts empty`, async () => {
        const pool = `corrupt${name.length}`;
        const prefix = `exitpool:${pool}:`;
        await writeV1RedisKeys(raw, prefix);
        await spoil(prefix);
        const store = new RedisStateStore(`${redis.url}/${pool}`);
        const s = await readWholeState(store);
        await store.close();
        expect(s.movedAside?.path).to.match(/unusable-/);
        expect(s.records.sessions.size + s.records.health.size).to.equal(0);
        const aside = await raw.keys(`${prefix}unusable-*`);
        expect(aside.length, 'every key of the prefix moved').to.equal(Object.keys(redisFixture().keys).length);
        expect(await raw.hget(`${prefix}meta`, 'version')).to.equal(String(redisStateVersion()));
      });
    }
  });

  it('after Redis lost its data under an open store, the next batch brings the meta back: a restart reads what was written since', async () => {
    const store = new RedisStateStore(`${redis.url}/lost`, 'node-x');
    await readWholeState(store);
    await raw.flushall();
    const batch = emptyBatch(CONTRACT_CAPACITY);
    batch.puts.push({ ns: 'health', key: '1', value: 'after the loss' });
    await store.write(batch);
    await store.close();
    const again = new RedisStateStore(`${redis.url}/lost`, 'node-x');
    const state = await readWholeState(again);
    expect([...state.records.health]).to.deep.equal([['1', 'after the loss']]);
    expect(await raw.hgetall('exitpool:lost:node:node-x:meta')).to.deep.equal({ format: 'exitpool-state', version: String(redisStateVersion()) });
  });

  it('refuses to open when Redis cannot be reached, naming it without its password', async () => {
    const store = new RedisStateStore('redis://:secret-password-1234@127.0.0.1:1/x');
    expect(store.location).to.equal('redis://127.0.0.1:1/x');
    const failure = await openFailure(store);
    expect(failure.kind).to.equal('unreachable');
    expect(JSON.stringify(failure)).to.not.include('secret');
  });
});
