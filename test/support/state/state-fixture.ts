/**
 * The committed state of format version 1 (test/fixtures/state-v1/): copied for a test, never
 * opened in place, and optionally moved in time so that it reads as written a moment ago.
 */
import fs from 'node:fs';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { fileURLToPath } from 'node:url';
import type { Redis } from 'ioredis';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..');
export const STATE_V1_DIR = path.join(repo, 'test', 'fixtures', 'state-v1');

export interface FixtureRecords {
  writtenAt: string;
  formatVersion: number;
  records: Record<string, Record<string, string>>;
  rings: Record<string, { seq: number; value: string }[]>;
}

export function fixtureRecords(): FixtureRecords {
  return JSON.parse(fs.readFileSync(path.join(STATE_V1_DIR, 'records.json'), 'utf8')) as FixtureRecords;
}

type Json = Record<string, unknown>;
const shiftIso = (t: unknown, ms: number): string => new Date(Date.parse(t as string) + ms).toISOString();

/**
 * One v1 record or ring value with every time in it moved by `ms`; also the ring seq where a
 * ring is ordered by time (the stats). This knows the v1 shapes: it is how a test makes the
 * fixture's state current, not something the service does.
 */
export function shiftValue(ns: string, value: string, ms: number): string {
  const o = JSON.parse(value) as Json;
  switch (ns) {
    case 'sessions':
      o.created_at = (o.created_at as number) + ms;
      o.last_seen = (o.last_seen as number) + ms;
      break;
    case 'exit-bans':
      o.since = (o.since as number) + ms;
      o.until = (o.until as number) + ms;
      break;
    case 'health': {
      o.window = (o.window as Json[]).map((e) => ({ ...e, at: (e.at as number) + ms }));
      const ladder = o.ladder as Json;
      if (ladder.lastCompletedAt !== null) ladder.lastCompletedAt = (ladder.lastCompletedAt as number) + ms;
      const pending = o.pending as Json | null;
      if (pending) pending.dueAt = (pending.dueAt as number) + ms;
      break;
    }
    case 'audit-session':
    case 'audit-operator':
    case 'stats-fine':
    case 'stats-long':
      o.time = shiftIso(o.time, ms);
      break;
    case 'exit-assignments':
      break;
    default:
      throw new Error(`no such namespace in format version 1: ${ns}`);
  }
  return JSON.stringify(o);
}

const timeOrderedRing = (ring: string): boolean => ring.startsWith('stats-');

/** The fixture's records as they read once moved by `ms` (what a test expects back). */
export function shiftedRecords(ms: number): FixtureRecords {
  const f = fixtureRecords();
  return {
    ...f,
    writtenAt: shiftIso(f.writtenAt, ms),
    records: Object.fromEntries(Object.entries(f.records).map(([ns, m]) => [ns, Object.fromEntries(Object.entries(m).map(([k, v]) => [k, shiftValue(ns, v, ms)]))])),
    rings: Object.fromEntries(Object.entries(f.rings).map(([ring, l]) => [ring, l.map((e) => ({ seq: timeOrderedRing(ring) ? e.seq + ms : e.seq, value: shiftValue(ring, e.value, ms) }))])),
  };
}

/** How far to move the fixture so that it reads as written `agoMs` before now. */
export function shiftToNow(agoMs = 0): number {
  return Date.now() - agoMs - Date.parse(fixtureRecords().writtenAt);
}

/**
 * Copies the v1 state.db into `dir` (created 0700 if needed) as DATA_DIR/state.db; with `shiftMs`
 * every time in the copy is moved by that much, in place, keeping its format (version 1).
 */
export function copyV1StateFile(dir: string, options: { shiftMs?: number; name?: string } = {}): string {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const file = path.join(dir, options.name ?? 'state.db');
  fs.copyFileSync(path.join(STATE_V1_DIR, 'state.db'), file);
  fs.chmodSync(file, 0o600);
  const ms = options.shiftMs ?? 0;
  if (ms !== 0) {
    const db = new DatabaseSync(file);
    try {
      db.exec('BEGIN');
      for (const r of db.prepare('SELECT ns, key, value FROM records').all() as { ns: string; key: string; value: string }[]) {
        db.prepare('UPDATE records SET value = ? WHERE ns = ? AND key = ?').run(shiftValue(r.ns, r.value, ms), r.ns, r.key);
      }
      // Furthest first in the direction of the move, so no seq meets one not yet moved.
      for (const r of db.prepare(`SELECT ns, seq, value FROM rings ORDER BY seq ${ms > 0 ? 'DESC' : 'ASC'}`).all() as { ns: string; seq: number; value: string }[]) {
        db.prepare('UPDATE rings SET seq = ?, value = ? WHERE ns = ? AND seq = ?').run(timeOrderedRing(r.ns) ? r.seq + ms : r.seq, shiftValue(r.ns, r.value, ms), r.ns, r.seq);
      }
      db.exec('COMMIT');
      // Back to one file, as the fixture is.
      db.exec('PRAGMA wal_checkpoint(TRUNCATE)');
    } finally {
      db.close();
    }
  }
  return file;
}

interface RedisDump {
  prefix: string;
  keys: Record<string, { type: 'hash'; fields: Record<string, string> } | { type: 'zset'; members: { score: number; member: string }[] }>;
}

export function redisFixture(): RedisDump {
  return JSON.parse(fs.readFileSync(path.join(STATE_V1_DIR, 'redis-v1.json'), 'utf8')) as RedisDump;
}

/** Writes the v1 Redis keys under `prefix` (`exitpool:<pool>:`), moved by `shiftMs`. */
export async function writeV1RedisKeys(redis: Redis, prefix: string, shiftMs = 0): Promise<void> {
  for (const [name, k] of Object.entries(redisFixture().keys)) {
    const key = prefix + name;
    await redis.del(key);
    if (k.type === 'hash') {
      const ns = name.startsWith('rec:') ? name.slice(4) : '';
      const fields = Object.entries(k.fields).flatMap(([f, v]) => [f, ns && shiftMs !== 0 ? shiftValue(ns, v, shiftMs) : v]);
      await redis.hset(key, ...fields);
    } else {
      const ring = name.slice('ring:'.length);
      for (const { score, member } of k.members) {
        const value = member.slice(member.indexOf(':') + 1);
        const seq = timeOrderedRing(ring) ? score + shiftMs : score;
        await redis.zadd(key, seq, `${seq}:${shiftMs !== 0 ? shiftValue(ring, value, shiftMs) : value}`);
      }
    }
  }
}
