import type { ExitChoice } from './exit-choice.js';
import type { ExitRelay } from './exit-relay.js';

/** What deciding who leaves a shared exit reads (ExitAssignments.spreadOffSharedExits). */
export interface SpreadInput {
  /** Each instance's exit; `distinct` false when it was assigned in a shortage. */
  readonly assigned: ReadonlyMap<number, { readonly relay: ExitRelay; readonly distinct: boolean }>;
  /** Relays kept for instances since a restart (instance → fingerprint): as taken as the assigned ones. */
  readonly reserved: ReadonlyMap<number, { readonly fingerprint: string }>;
  /** Instances that found no eligible exit at all (tor's own selection). */
  readonly unpinned: readonly number[];
  /** Whether an assigned instance may move (it serves no session, its exit was the pool's own choice). */
  readonly movable: (id: number) => boolean;
  /** Instances told to move already (by the caller's own reaction): neither moved again nor kept as a unit's or relay's holder. */
  readonly moving?: ReadonlySet<number>;
  /** The choice a move of instance `id` would make, the relays in `claimed` taken too. */
  readonly choose: (id: number, claimed: readonly ExitRelay[]) => ExitChoice;
  /**
   * Whether instance `id`'s exit still shares a unit (EXIT_DISTINCT: its /24, its family) with
   * another instance's once those in `leaving` have left and the relays in `arriving` are taken.
   * Absent: the third pass is not made (the units other nodes hold are about to be read again).
   */
  readonly sharesUnit?: (id: number, leaving: ReadonlySet<number>, arriving: readonly ExitRelay[]) => boolean;
}

/**
 * The instances to move now, in three passes, each choice made with the earlier ones' taken:
 * 1. every unpinned one for which an exit is eligible (it takes what a bootstrap would, a shared
 *    relay in a shortage too);
 * 2. those on a relay another instance holds (one relay twice is one IP twice) whose move would
 *    give them a relay nobody else here holds, as many as such relays are free;
 * 3. those on a unit another instance holds (two IPs in one /24 are blocked together) that still
 *    share it after the moves before, whose move would give them a unit of their own: those
 *    assigned in a shortage first, the highest-numbered first (so the lowest keeps the unit);
 *    then those that held it first, which move only when what they share it with did not.
 */
export function instancesToSpread(input: SpreadInput): number[] {
  const already = input.moving ?? new Set<number>();
  const assigned = new Map([...input.assigned].filter(([id]) => !already.has(id)));
  const { reserved } = input;
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
  const sharesUnit = input.sharesUnit;
  if (sharesUnit === undefined) return moving;
  // Those assigned in a shortage first; one assigned as distinct moves only when what it shares
  // with cannot (it serves sessions) or found nothing of its own.
  const unitSharers = [...assigned]
    .filter(([id]) => input.movable(id) && !moving.includes(id))
    .sort(([x, a], [y, b]) => Number(a.distinct) - Number(b.distinct) || y - x)
    .map(([id]) => id);
  for (const id of unitSharers) {
    if (!sharesUnit(id, new Set([...already, ...moving]), claimed)) continue;
    const choice = input.choose(id, claimed);
    if (!choice.ok || !choice.distinct) continue;
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
