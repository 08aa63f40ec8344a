import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';

/**
 * The fleet's epoch (README.md here, "When Redis loses its data"): one key in Redis names the
 * fleet's life since it was created, and each node remembers the one it belongs to in its own
 * DATA_DIR (fleet-epoch-file.ts). A node that finds its epoch gone from Redis (or another in its
 * place that does not continue it) knows that Redis lost the fleet's data, or is another
 * fleet's: an empty list there is not a revocation of everything, and its own tokens, bans and
 * hop keys are not the new truth either. Only an operator's FLEET_RESEED starts a new epoch that
 * continues the lost one; every node that remembers the lost one then joins it.
 */

/** An epoch id: what ids this code makes, and what it accepts from Redis. */
const EPOCH_ID = /^[A-Za-z0-9_-]{1,64}$/;
/** Earlier epochs an epoch names as continued (re-seeded after a loss); the oldest are dropped beyond it. */
export const MAX_CONTINUED_EPOCHS = 16;

/** An epoch and the earlier ones it continues (each re-seed after a loss adds the lost one). */
export interface Epoch {
  id: string;
  continues: string[];
}

/** Where this node stands with the fleet whose Redis it reaches. */
export type EpochStanding =
  /** The fleet is the one this node knows (or one it may join: new, or re-seeded from its own). */
  | { kind: 'member'; epoch: Epoch; how: 'same' | 'created' | 'joined' | 'rejoined' | 'reseeded' }
  /**
   * Redis does not hold this node's epoch (lost its data, or holds another fleet's): `found` is
   * what it holds (null: nothing, or text that is not an epoch). `remembered` is null only for a
   * node new to every fleet that found such text.
   */
  | { kind: 'lost'; remembered: Epoch | null; found: Epoch | null };

export function isEpochId(id: string): boolean {
  return EPOCH_ID.test(id);
}

export function newEpochId(now: number = Date.now()): string {
  const stamp = new Date(now).toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z');
  return `${stamp}-${randomBytes(9).toString('base64url')}`;
}

/** The text Redis keeps: the id, then the epochs it continues, space-separated. */
export function encodeEpoch(epoch: Epoch): string {
  return [epoch.id, ...epoch.continues].join(' ');
}

/** The epoch Redis holds, or null when the text is not one (written by anything else): then it is not ours. */
export function decodeEpoch(text: string): Epoch | null {
  const ids = text.split(' ');
  if (ids.length > 1 + MAX_CONTINUED_EPOCHS || !ids.every(isEpochId)) return null;
  const [id, ...continues] = ids as [string, ...string[]];
  return { id, continues };
}

/** The epoch that continues `lost` (and all it continued, and `over`, another fleet's, when a re-seed replaces one). */
export function continuing(lost: Epoch, over: Epoch | null, now: number = Date.now()): Epoch {
  const lineage = [lost.id, ...lost.continues, ...(over ? [over.id, ...over.continues] : [])];
  const unique = [...new Set(lineage)].filter((id) => id !== '').slice(0, MAX_CONTINUED_EPOCHS);
  return { id: newEpochId(now), continues: unique };
}

/** Sets KEYS[1] to ARGV[2] only when it still holds ARGV[1] ('' = absent); returns what it holds after. */
const COMPARE_AND_SET = `local v = redis.call('GET', KEYS[1])
if (v == false and ARGV[1] == '') or v == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2])
  return ARGV[2]
end
if v == false then return '' end
return v`;

/**
 * Judges the epoch Redis holds against the one this node remembers (null: a node new to every
 * fleet) and, with FLEET_RESEED naming the remembered epoch, re-seeds. Only at a join does a
 * node create or re-seed; a renewal only reads (`judge` with `mayCreate` false).
 */
export class FleetEpochKey {
  constructor(
    private readonly redis: Redis,
    private readonly poolPrefix: string,
  ) {}

  get key(): string {
    return `${this.poolPrefix}fleet:epoch`;
  }

  async read(): Promise<{ text: string | null; epoch: Epoch | null }> {
    const text = await this.redis.get(this.key);
    return { text, epoch: text === null ? null : decodeEpoch(text) };
  }

  /**
   * Where this node stands. `reseed` is FLEET_RESEED ('' when unset): it re-seeds only when it
   * names the remembered epoch and Redis holds no epoch that continues it.
   */
  async judge(remembered: Epoch | null, options: { mayCreate: boolean; reseed: string }): Promise<EpochStanding> {
    for (let attempt = 0; ; attempt++) {
      const { text, epoch } = await this.read();
      const standing = standingOf(remembered, text, epoch);
      if (standing.kind === 'member') return standing;
      if (!options.mayCreate) return { kind: 'lost', remembered, found: epoch };
      let next: Epoch;
      let how: 'created' | 'reseeded';
      if (remembered === null && text === null) {
        next = { id: newEpochId(), continues: [] };
        how = 'created';
      } else if (remembered !== null && options.reseed !== '' && options.reseed === remembered.id) {
        next = continuing(remembered, epoch);
        how = 'reseeded';
      } else {
        return { kind: 'lost', remembered, found: epoch };
      }
      // Atomically against another node doing the same: a node that lost the race judges what the other wrote.
      const after = String(await this.redis.eval(COMPARE_AND_SET, 1, this.key, text ?? '', encodeEpoch(next)));
      if (after === encodeEpoch(next)) return { kind: 'member', epoch: next, how };
      if (attempt >= 2) throw new Error(`${this.key} kept changing while this node judged it`);
    }
  }
}

/**
 * Without creating anything: member (same, joined, rejoined) or lost; `none` when this node knows
 * no fleet and Redis holds none (a new fleet, for a join to create). Text that is not an epoch
 * is nobody's fleet to join.
 */
function standingOf(remembered: Epoch | null, text: string | null, found: Epoch | null): EpochStanding | { kind: 'none' } {
  if (remembered === null) {
    if (text === null) return { kind: 'none' };
    return found === null ? { kind: 'lost', remembered, found } : { kind: 'member', epoch: found, how: 'joined' };
  }
  if (found === null) return { kind: 'lost', remembered, found };
  if (found.id === remembered.id) return { kind: 'member', epoch: found, how: 'same' };
  if (found.continues.includes(remembered.id)) return { kind: 'member', epoch: found, how: 'rejoined' };
  return { kind: 'lost', remembered, found };
}
