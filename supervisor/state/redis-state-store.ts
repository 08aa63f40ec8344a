import type { Redis } from 'ioredis';
import { errorMessage } from '../../shared/errors/error-message.js';
import { closeRedis, redisClient, redisLocation } from './redis-location.js';
import {
  emptyStoredState,
  RECORD_NAMESPACES,
  RING_NAMESPACES,
  SESSION_SLICE_ROWS,
  SMALL_RECORD_NAMESPACES,
  StateOpenError,
  StateStoreError,
  type SessionRows,
  type StateBatch,
  type StateStore,
  type StoredState,
} from './state-store.js';

/** Written to the meta hash; a prefix holding another value is another program's. */
export const REDIS_STATE_FORMAT = 'exitpool-state';

/**
 * The Redis records' format versions and how an older prefix is brought to the current one, as
 * for the SQLite file (sqlite-migrations.ts). Version 1: a `meta` hash (format, version), one
 * hash per record namespace (`rec:<ns>`, field = key, value = JSON), one sorted set per ring
 * (`ring:<ns>`, scored by seq, members `<seq>:<value>`). There is no step yet: Redis already
 * keeps the sessions apart from the rest. Redis has no transaction that can read, so a step must
 * be safe to run again: the version is raised after each, and a start that stopped in the
 * middle of one runs that one again.
 */
export interface RedisMigration {
  readonly to: number;
  readonly summary: string;
  apply(redis: Redis, key: (kind: 'rec' | 'ring' | 'meta', ns?: string) => string): Promise<void>;
}

export const REDIS_MIGRATIONS: readonly RedisMigration[] = [];

/** The version this release writes: 1, plus one per migration. */
export function redisStateVersion(migrations: readonly RedisMigration[] = REDIS_MIGRATIONS): number {
  return 1 + migrations.length;
}

/** The code a Redis error reply starts with (WRONGTYPE, NOAUTH, …): the protocol's own error type. */
function replyCode(error: unknown): string {
  return /^([A-Z]+) /.exec(errorMessage(error))?.[1] ?? '';
}

const ACCESS_CODES = new Set(['NOAUTH', 'WRONGPASS', 'NOPERM']);

/** A key under the prefix holds another type than ours: proven corrupt. */
class CorruptRedisState extends Error {}

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
  readonly backend = 'redis';
  readonly location: string;
  private readonly redis: Redis;
  private readonly prefix: string;
  private readonly migrations: readonly RedisMigration[];

  constructor(url: string, node?: string, options: { migrations?: readonly RedisMigration[] } = {}) {
    const where = redisLocation(url);
    this.prefix = node === undefined ? where.poolPrefix : `${where.poolPrefix}node:${node}:`;
    // Credentials never reach the logs.
    this.location = node === undefined ? where.shown : `${where.shown} (node ${node})`;
    this.redis = redisClient(where);
    this.migrations = options.migrations ?? REDIS_MIGRATIONS;
  }

  private key(kind: 'rec' | 'ring' | 'meta', ns = ''): string {
    return `${this.prefix}${kind}${ns ? `:${ns}` : ''}`;
  }

  private allKeys(): string[] {
    return [this.key('meta'), ...RECORD_NAMESPACES.map((ns) => this.key('rec', ns)), ...RING_NAMESPACES.map((ns) => this.key('ring', ns))];
  }

  /** Renames every key of the prefix to `<prefix>unusable-<time>:…`; returns where. */
  private async moveAside(): Promise<string> {
    const stamp = new Date().toISOString().replace(/[:.]/g, '-');
    const aside = `${this.prefix}unusable-${stamp}`;
    for (const k of this.allKeys()) if ((await this.redis.exists(k)) > 0) await this.redis.rename(k, `${aside}:${k.slice(this.prefix.length)}`);
    return `${this.location} keys ${aside}:*`;
  }

  private async writeMeta(version: number): Promise<void> {
    await this.redis.hset(this.key('meta'), 'format', REDIS_STATE_FORMAT, 'version', String(version));
  }

  /**
   * Judges what the prefix holds: null when nothing (a first start), else its version. Throws
   * StateOpenError for another program's keys or a newer format, CorruptRedisState for ours garbled.
   */
  private async judge(newest: number): Promise<number | null> {
    let meta: Record<string, string>;
    try {
      meta = await this.redis.hgetall(this.key('meta'));
    } catch (error) {
      if (replyCode(error) === 'WRONGTYPE') throw new CorruptRedisState(`${this.key('meta')} is not a hash`);
      throw error;
    }
    const holdsData = (await this.redis.exists(...this.allKeys().slice(1))) > 0;
    if (Object.keys(meta).length === 0) {
      if (!holdsData) return null;
      throw new StateOpenError({ kind: 'foreign', detail: `${this.location} holds keys under ${this.prefix} that exitpool did not write (no ${this.key('meta')})` });
    }
    if (meta.format !== REDIS_STATE_FORMAT) {
      throw new StateOpenError({ kind: 'foreign', detail: `${this.location} holds keys under ${this.prefix} of another program (format ${JSON.stringify(meta.format ?? null)})` });
    }
    const raw = meta.version ?? '';
    if (!/^[1-9][0-9]{0,8}$/.test(raw)) throw new CorruptRedisState(`format version ${JSON.stringify(raw)} is not a version`);
    const version = Number(raw);
    if (version > newest) throw new StateOpenError({ kind: 'newer', found: version, newest });
    return version;
  }

  private async migrate(found: number): Promise<{ from: number; to: number }> {
    let at = found;
    for (const m of this.migrations.slice(found - 1)) {
      try {
        await m.apply(this.redis, (kind, ns) => this.key(kind, ns));
      } catch (error) {
        throw new StateOpenError({ kind: 'migration', from: at, to: m.to, detail: errorMessage(error) });
      }
      at = m.to;
      await this.writeMeta(at);
    }
    return { from: found, to: at };
  }

  private async readSmall(state: StoredState): Promise<void> {
    try {
      for (const ns of SMALL_RECORD_NAMESPACES) {
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
      // Only its type: the sessions are read later (readSessions).
      const type = await this.redis.type(this.key('rec', 'sessions'));
      if (type !== 'none' && type !== 'hash') throw new CorruptRedisState(`${this.key('rec', 'sessions')} is a ${type}, not a hash`);
    } catch (error) {
      if (replyCode(error) === 'WRONGTYPE') throw new CorruptRedisState(`a key under ${this.prefix} has another type than exitpool writes (${errorMessage(error)})`);
      throw error;
    }
  }

  async open(): Promise<StoredState> {
    try {
      await this.redis.connect();
    } catch (error) {
      throw new StateOpenError({ kind: ACCESS_CODES.has(replyCode(error)) ? 'access' : 'unreachable', detail: `Redis at ${this.location} cannot be reached: ${errorMessage(error)}` });
    }
    const newest = redisStateVersion(this.migrations);
    try {
      let state = emptyStoredState();
      let version: number | null;
      try {
        version = await this.judge(newest);
        if (version !== null && version < newest) state.migrated = await this.migrate(version);
        if (version !== null) await this.readSmall(state);
      } catch (error) {
        if (!(error instanceof CorruptRedisState)) throw error;
        const movedTo = await this.moveAside();
        state = emptyStoredState();
        state.movedAside = { path: movedTo, reason: error.message };
        version = null;
      }
      if (version === null) await this.writeMeta(newest);
      return state;
    } catch (error) {
      if (error instanceof StateOpenError) throw error;
      const code = replyCode(error);
      throw new StateOpenError({ kind: ACCESS_CODES.has(code) ? 'access' : 'io', detail: `Redis at ${this.location}: ${errorMessage(error)}` });
    }
  }

  /** HSCAN in slices: Redis answers other clients between them. No order (the caller sorts). */
  async readSessions(onSlice: (rows: SessionRows) => void): Promise<number> {
    const seen = new Set<string>();
    let cursor = '0';
    try {
      do {
        const [next, flat] = await this.redis.hscan(this.key('rec', 'sessions'), cursor, 'COUNT', SESSION_SLICE_ROWS);
        cursor = next;
        const rows: SessionRows = { keys: [], values: [] };
        for (let i = 0; i + 1 < flat.length; i += 2) {
          const key = flat[i] as string;
          // HSCAN may return a field twice.
          if (seen.has(key)) continue;
          seen.add(key);
          rows.keys.push(key);
          rows.values.push(flat[i + 1] as string);
        }
        if (rows.keys.length > 0) onSlice(rows);
      } while (cursor !== '0');
    } catch (error) {
      throw new StateStoreError(`reading the sessions from Redis at ${this.location} failed: ${errorMessage(error)}`);
    }
    return seen.size;
  }

  async write(batch: StateBatch): Promise<void> {
    const m = this.redis.multi();
    // A Redis that lost its data while this node ran gets the meta hash back with the first batch
    // after the loss, so the next start reads what was written since rather than refusing it as
    // another program's (supervisor/fleet/README.md, "When Redis loses its data").
    m.hsetnx(this.key('meta'), 'format', REDIS_STATE_FORMAT).hsetnx(this.key('meta'), 'version', String(redisStateVersion(this.migrations)));
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
