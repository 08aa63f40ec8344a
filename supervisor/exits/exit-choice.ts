import { distinctKeys, type DistinctUnit, type ExitRelay } from './exit-relay.js';

export interface ExitChoiceInput {
  readonly exits: readonly ExitRelay[];
  /** Exits the other instances are assigned: the choice keeps its distance from them (`unit`). */
  readonly taken: readonly ExitRelay[];
  /** Unit keys (distinctKeys) other nodes of the fleet hold: kept apart from as the exits in `taken` are. */
  readonly takenElsewhere?: ReadonlyMap<string, unknown>;
  readonly unit: DistinctUnit;
  /** Banned, or explicitly unwanted (a session's recent exits, the exit being left). */
  readonly excluded: (relay: ExitRelay) => boolean;
  /** TOR_EXIT_NODES: exits it names are preferred, or required when `strict`. */
  readonly preferred?: (relay: ExitRelay) => boolean;
  readonly strict?: boolean;
  /** Exits chosen only when no other qualifies (suspect: one party complained of them), short of another instance's relay. */
  readonly lastResort?: (relay: ExitRelay) => boolean;
  /** Uniform in [0, 1). */
  readonly random: () => number;
}

export type ExitChoice =
  | { ok: true; relay: ExitRelay; distinct: boolean }
  | { ok: false; reason: 'no_eligible_exit' };

/**
 * Chooses an exit, bandwidth-weighted among the eligible: not excluded, within TOR_EXIT_NODES
 * (when strict; otherwise only while it names any eligible exit), and sharing no `unit` with an
 * exit another instance holds. When every eligible exit shares one, the least-shared is chosen
 * (a relay no other instance holds first) and `distinct` is false, so the caller reports the
 * shortage instead of hiding it. A `lastResort` exit comes after every other, except that a
 * relay of its own still comes before another instance's.
 */
export function chooseExit(input: ExitChoiceInput): ExitChoice {
  let eligible = input.exits.filter((e) => !input.excluded(e));
  if (input.preferred) {
    const named = eligible.filter(input.preferred);
    eligible = named.length > 0 || input.strict ? named : eligible;
  }
  if (eligible.length === 0) return { ok: false, reason: 'no_eligible_exit' };
  const used = new Map<string, number>();
  for (const t of input.taken) for (const k of distinctKeys(t, input.unit)) used.set(k, (used.get(k) ?? 0) + 1);
  for (const k of input.takenElsewhere?.keys() ?? []) used.set(k, (used.get(k) ?? 0) + 1);
  const sharing = (e: ExitRelay): number => distinctKeys(e, input.unit).reduce((n, k) => n + (used.get(k) ?? 0), 0);
  // A relay of its own comes first, however crowded its /24 or family: two instances on one
  // relay are one exit twice (same IP, same fate), where a shared /24 still gives two IPs, and an
  // exit one party complained of is still an IP of its own. Summed alone, a free relay in a /24
  // of two would tie with a relay already held by one instance (seen in the fleet e2e: two
  // instances on one relay, one relay unused); ranked after suspicion, every exit but the taken
  // ones suspect put an instance on another's relay (seen in the verdicts e2e).
  const onTakenRelay = (e: ExitRelay): number => used.get(distinctKeys(e, 'relay')[0] as string) ?? 0;
  const lastResort = (e: ExitRelay): number => (input.lastResort?.(e) ? 1 : 0);
  const best = fewest(fewest(fewest(eligible, onTakenRelay), lastResort), sharing);
  return { ok: true, relay: weightedPick(best, input.random), distinct: sharing(best[0] as ExitRelay) === 0 };
}

/** The exits of `exits` with the lowest `score`. */
function fewest(exits: readonly ExitRelay[], score: (e: ExitRelay) => number): ExitRelay[] {
  const least = Math.min(...exits.map(score));
  return exits.filter((e) => score(e) === least);
}

function weightedPick(exits: readonly ExitRelay[], random: () => number): ExitRelay {
  const total = exits.reduce((sum, e) => sum + e.bandwidth, 0);
  let point = random() * total;
  for (const e of exits) {
    point -= e.bandwidth;
    if (point < 0) return e;
  }
  return exits[exits.length - 1] as ExitRelay;
}
