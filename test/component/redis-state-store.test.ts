import { expect } from 'chai';
import { Redis } from 'ioredis';
import { RedisStateStore } from '../../supervisor/state/redis-state-store.js';
import { emptyBatch, StateStoreError, type StateBatch } from '../../supervisor/state/state-store.js';
import { startRedis, type RunningRedis } from '../support/processes/redis-server.js';

const CAP = { 'audit-session': 3, 'audit-operator': 3, 'stats-fine': 900, 'stats-long': 1440 };

describe('durable state: the Redis store (a real redis-server on loopback)', function () {
  this.timeout(30_000);
  let redis: RunningRedis;
  before(async () => {
    redis = await startRedis();
  });
  after(async () => {
    await redis.stop();
  });

  it('writes batches atomically and reads them back: upserts, deletes, whole namespaces, rings trimmed by count', async () => {
    const store = new RedisStateStore(`${redis.url}/roundtrip`);
    expect((await store.load()).records.sessions.size).to.equal(0);
    const b: StateBatch = emptyBatch(CAP);
    b.puts.push({ ns: 'sessions', key: 'a', value: '1' }, { ns: 'sessions', key: 'b', value: '2' }, { ns: 'health', key: '0', value: 'h0' });
    for (let i = 1; i <= 5; i++) b.appends.push({ ring: 'audit-session', seq: i * 2, value: `e:${i}` });
    await store.write(b);
    const b2 = emptyBatch(CAP);
    b2.deletes.push({ ns: 'sessions', key: 'a' });
    b2.puts.push({ ns: 'sessions', key: 'b', value: '3' });
    b2.replace.push('health');
    b2.puts.push({ ns: 'health', key: '1', value: 'h1' });
    await store.write(b2);
    await store.close();
    const again = new RedisStateStore(`${redis.url}/roundtrip`);
    const s = await again.load();
    expect([...s.records.sessions]).to.deep.equal([['b', '3']]);
    expect([...s.records.health]).to.deep.equal([['1', 'h1']]);
    expect(s.rings['audit-session'].map((r) => [r.seq, r.value]), 'the newest 3, oldest first, values with colons intact').to.deep.equal([[6, 'e:3'], [8, 'e:4'], [10, 'e:5']]);
    expect(s.movedAside).to.equal(null);
    await again.close();
  });

  it('keeps prefixes apart, and renames a foreign or newer-format state aside instead of reading it', async () => {
    const raw = new Redis(redis.url);
    try {
      await raw.hset('exitpool:foreign:meta', 'format', 'something-else', 'version', '9');
      await raw.hset('exitpool:foreign:rec:sessions', 'k', 'v');
      const store = new RedisStateStore(`${redis.url}/foreign`);
      const s = await store.load();
      expect(s.movedAside?.reason).to.match(/something-else/);
      expect(s.records.sessions.size).to.equal(0);
      const aside = await raw.keys('exitpool:foreign:unusable-*');
      expect(aside.sort().map((k) => k.replace(/unusable-[^:]+/, 'unusable-T'))).to.deep.equal(['exitpool:foreign:unusable-T:meta', 'exitpool:foreign:unusable-T:rec:sessions']);
      expect(await raw.hget('exitpool:foreign:meta', 'format')).to.equal('exitpool-state');
      await store.close();
      expect(await raw.exists('exitpool:roundtrip:rec:sessions'), 'another prefix untouched').to.equal(1);
    } finally {
      raw.disconnect();
    }
  });

  it('refuses to load when Redis cannot be reached, naming it without its password', async () => {
    const store = new RedisStateStore('redis://:secret@127.0.0.1:1/x');
    expect(store.location).to.equal('redis://127.0.0.1:1/x');
    let error: unknown;
    await store.load().catch((e: unknown) => (error = e));
    expect(error).to.be.instanceOf(StateStoreError);
    expect(String(error)).to.not.include('secret');
    await store.close();
  });
});
