import type { Redis } from 'ioredis';
import { closeRedis, redisClient, redisLocation } from './redis-location.js';
import {
  emptyStoredState,
  RECORD_NAMESPACES,
  RING_NAMESPACES,
  StateStoreError,
  type StateBatch,
  type StateStore,
  type StoredState,
} from './state-store.js';

/** Written to the meta hash; a prefix holding another value is another program's or another format's. */
const REDIS_STATE_FORMAT = 'exitpool-state';
const REDIS_STATE_VERSION = '1';

/**
 * The durable state in Redis (`STATE_STORE=redis://…`): the same records and rings as the SQLite
 * store, as one hash per record namespace and one sorted set per ring (scored by seq), under a
 * key prefix (`exitpool:` by default, the URL's path names another; with `node`, that node's own
 * `exitpool:…:node:<node>:`, so several nodes of one pool never write over each other). A batch
 * is one MULTI/EXEC, so it applies whole or not at all. Every write is already off the request
 * path (DurableState sends one batch a second); ioredis queues commands while Redis is away and
 * the writer retries the batch after a failure.
 */
export class RedisStateStore implements StateStore {
  readonly location: string;
  private readonly redis: Redis;
  private readonly prefix: string;

  constructor(url: string, node?: string) {
    const where = redisLocation(url);
    this.prefix = node === undefined ? where.poolPrefix : `${where.poolPrefix}node:${node}:`;
    // Credentials never reach the logs.
    this.location = node === undefined ? where.shown : `${where.shown} (node ${node})`;
    this.redis = redisClient(where);
  }

  private key(kind: 'rec' | 'ring' | 'meta', ns = ''): string {
    return `${this.prefix}${kind}${ns ? `:${ns}` : ''}`;
  }

  private allKeys(): string[] {
    return [this.key('meta'), ...RECORD_NAMESPACES.map((ns) => this.key('rec', ns)), ...RING_NAMESPACES.map((ns) => this.key('ring', ns))];
  }

  async load(): Promise<StoredState> {
    try {
      await this.redis.connect();
    } catch (error) {
      throw new StateStoreError(`Redis at ${this.location} cannot be reached: ${(error as Error).message}`);
    }
    const state = emptyStoredState();
    const meta = await this.redis.hgetall(this.key('meta'));
    const holdsData = (await this.redis.exists(...this.allKeys().slice(1))) > 0;
    if (meta.format !== REDIS_STATE_FORMAT || meta.version !== REDIS_STATE_VERSION) {
      if (holdsData || Object.keys(meta).length > 0) {
        // Not ours, or another format: renamed aside, as the SQLite store moves its file aside.
        const stamp = new Date().toISOString().replace(/[:.]/g, '-');
        const aside = `${this.prefix}unusable-${stamp}`;
        for (const k of this.allKeys()) if ((await this.redis.exists(k)) > 0) await this.redis.rename(k, `${aside}:${k.slice(this.prefix.length)}`);
        state.movedAside = { path: `${this.location} keys ${aside}:*`, reason: `format ${JSON.stringify(meta.format ?? null)} version ${JSON.stringify(meta.version ?? null)}` };
      }
      await this.redis.hset(this.key('meta'), 'format', REDIS_STATE_FORMAT, 'version', REDIS_STATE_VERSION);
      return state;
    }
    for (const ns of RECORD_NAMESPACES) {
      for (const [k, v] of Object.entries(await this.redis.hgetall(this.key('rec', ns)))) state.records[ns].set(k, v);
    }
    for (const ring of RING_NAMESPACES) {
      const flat = await this.redis.zrange(this.key('ring', ring), 0, -1, 'WITHSCORES');
      for (let i = 0; i + 1 < flat.length; i += 2) {
        const member = flat[i] as string;
        // A member is `<seq>:<value>` (members of a sorted set must differ).
        state.rings[ring].push({ seq: Number(flat[i + 1]), value: member.slice(member.indexOf(':') + 1) });
      }
    }
    return state;
  }

  async write(batch: StateBatch): Promise<void> {
    const m = this.redis.multi();
    for (const ns of batch.replace) m.del(this.key('rec', ns));
    for (const d of batch.deletes) m.hdel(this.key('rec', d.ns), d.key);
    for (const p of batch.puts) m.hset(this.key('rec', p.ns), p.key, p.value);
    const touched = new Set<(typeof RING_NAMESPACES)[number]>();
    for (const a of batch.appends) {
      m.zremrangebyscore(this.key('ring', a.ring), a.seq, a.seq);
      m.zadd(this.key('ring', a.ring), a.seq, `${a.seq}:${a.value}`);
      touched.add(a.ring);
    }
    // By count: the newest `capacity` members stay.
    for (const ring of touched) m.zremrangebyrank(this.key('ring', ring), 0, -batch.capacity[ring] - 1);
    const results = await m.exec();
    const failed = results?.find(([error]) => error !== null);
    if (results === null || failed) throw new StateStoreError(`Redis transaction failed: ${failed?.[0]?.message ?? 'aborted'}`);
  }

  close(): Promise<void> {
    return closeRedis(this.redis);
  }
}
