import { expect } from 'chai';
import { Redis } from 'ioredis';
import { RedisStateStore } from '../../supervisor/state/redis-state-store.js';
import { StateStoreError } from '../../supervisor/state/state-store.js';
import { expectStoreRoundTrip } from '../support/state/store-contract.js';
import { startRedis, type RunningRedis } from '../support/processes/redis-server.js';


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
    await expectStoreRoundTrip(() => new RedisStateStore(`${redis.url}/roundtrip`));
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
