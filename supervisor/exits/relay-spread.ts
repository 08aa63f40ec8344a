import type { ExitChoice } from './exit-choice.js';
import type { ExitRelay } from './exit-relay.js';

/** What deciding who leaves a shared relay reads (ExitAssignments.spreadOffSharedRelays). */
export interface SpreadInput {
  /** Each instance's exit; `distinct` false when it was assigned in a shortage. */
  readonly assigned: ReadonlyMap<number, { readonly relay: ExitRelay; readonly distinct: boolean }>;
  /** Relays kept for instances since a restart (instance → fingerprint): as taken as the assigned ones. */
  readonly reserved: ReadonlyMap<number, { readonly fingerprint: string }>;
  /** Instances that found no eligible exit at all (tor's own selection). */
  readonly unpinned: readonly number[];
  /** Whether an assigned instance may move (it serves no session, its exit was the pool's own choice). */
  readonly movable: (id: number) => boolean;
  /** The choice a move of instance `id` would make, the relays in `claimed` taken too. */
  readonly choose: (id: number, claimed: readonly ExitRelay[]) => ExitChoice;
}

/**
 * The instances to move now: every unpinned one for which an exit is eligible (it takes what a
 * bootstrap would, a shared relay in a shortage too), then those on a relay another instance
 * holds whose move would give them a relay nobody else here holds, as many as such relays are
 * free (each one's choice is made with the earlier ones' taken).
 */
export function instancesToSpread(input: SpreadInput): number[] {
  const { assigned, reserved } = input;
  const heldBesides = (id: number, fingerprint: string): boolean =>
    [...assigned].some(([other, a]) => other !== id && a.relay.fingerprint === fingerprint) || [...reserved].some(([other, r]) => other !== id && r.fingerprint === fingerprint);
  const moving: number[] = [];
  const claimed: ExitRelay[] = [];
  for (const id of [...input.unpinned, ...relaySharers(assigned, input.movable)]) {
    const choice = input.choose(id, claimed);
    if (!choice.ok) continue;
    if (assigned.has(id) && (heldBesides(id, choice.relay.fingerprint) || claimed.includes(choice.relay))) continue;
    claimed.push(choice.relay);
    moving.push(id);
  }
  return moving;
}

/**
 * The instances that should leave a relay another instance holds, in the order they should move:
 * on each relay held more than once, every `movable` instance but the one that keeps it. The
 * keeper is one that cannot move (its sessions keep their IP) if any, else the one holding it as
 * distinct (it came first; the others were assigned in a shortage), else the lowest-numbered.
 */
function relaySharers(assigned: ReadonlyMap<number, { readonly relay: ExitRelay; readonly distinct: boolean }>, movable: (id: number) => boolean): number[] {
  const byRelay = new Map<string, number[]>();
  for (const [id, a] of assigned) byRelay.set(a.relay.fingerprint, [...(byRelay.get(a.relay.fingerprint) ?? []), id]);
  const out: number[] = [];
  for (const ids of byRelay.values()) {
    if (ids.length < 2) continue;
    const keeper = ids.find((id) => !movable(id)) ?? ids.find((id) => assigned.get(id)?.distinct === true) ?? Math.min(...ids);
    out.push(...ids.filter((id) => id !== keeper && movable(id)).sort((x, y) => x - y));
  }
  return out;
}
