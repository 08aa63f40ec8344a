import type { RateLimit, RoutableFloor } from '../../shared/config/values.js';
import { routableFloorFor } from '../../shared/config/values.js';
import { localBudgetCounter, type BudgetCounter } from './budget-counter.js';
import { MAX_TRACKED_REPORTERS } from './client-evidence.js';

/** How many exits would stay eligible if one were banned (ExitAssignments.eligibleAfterBan). */
export interface EligibleAfterBan {
  /** Usable exits in the catalog (banned or not): the share of MIN_ELIGIBLE_EXITS is of these. */
  catalog: number;
  /** Eligible exits left in the whole catalog. */
  eligible: number;
  /** The banned exit's country ('' when unknown) and the eligible exits left there. */
  country: string;
  eligibleInCountry: number;
}

export interface BanFloors {
  minEligibleExits: RoutableFloor;
  minEligibleExitsPerCountry: number;
}

export type BanPermission = { ok: true } | { ok: false; why: string };

const HOUR_MS = 3_600_000;

/**
 * What a ban on client evidence must respect besides the evidence itself: each credential whose
 * reports bring it about has a budget of bans (CLIENT_BAN_BUDGET), and no ban may leave fewer
 * eligible exits than the floors (MIN_ELIGIBLE_EXITS in the catalog, MIN_ELIGIBLE_EXITS_PER_COUNTRY
 * in the banned exit's country). Also counts every ban for the hourly rate (BAN_RATE_ALERT).
 */
export class BanGuard {
  private readonly budgets: BudgetCounter;
  private readonly bansAt: number[] = [];

  constructor(
    budget: RateLimit,
    private readonly floors: BanFloors,
    private readonly now: () => number,
    /** Counted across a fleet (budget-counter.ts); absent: in this node's memory. */
    counter?: BudgetCounter,
  ) {
    this.budgets = counter ?? localBudgetCounter(budget, MAX_TRACKED_REPORTERS);
  }

  /** Whether a ban supported by `credentials`, leaving `after`, may be made; nothing is spent. */
  permits(credentials: readonly string[], after: EligibleAfterBan): BanPermission {
    const now = this.now();
    const spent = credentials.find((c) => !this.budgets.wouldAllow(c, now));
    if (spent !== undefined) return { ok: false, why: `${spent} has used its CLIENT_BAN_BUDGET` };
    const floor = after.catalog === 0 ? 0 : routableFloorFor(this.floors.minEligibleExits, after.catalog);
    if (after.eligible < floor) return { ok: false, why: `it would leave ${after.eligible} eligible exits, below MIN_ELIGIBLE_EXITS (${floor})` };
    if (after.country !== '' && after.eligibleInCountry < this.floors.minEligibleExitsPerCountry) {
      return { ok: false, why: `it would leave ${after.eligibleInCountry} eligible exits in ${after.country}, below MIN_ELIGIBLE_EXITS_PER_COUNTRY (${this.floors.minEligibleExitsPerCountry})` };
    }
    return { ok: true };
  }

  /** A ban was made on the word of `credentials`: each spends one of its budget. */
  spend(credentials: readonly string[]): void {
    const now = this.now();
    for (const c of new Set(credentials)) this.budgets.take(c, now);
  }

  /** A ban of any kind was made; returns the bans in the last hour. */
  counted(): number {
    const now = this.now();
    this.bansAt.push(now);
    return this.bansLastHour(now);
  }

  bansLastHour(now: number = this.now()): number {
    while (this.bansAt.length > 0 && (this.bansAt[0] as number) <= now - HOUR_MS) this.bansAt.shift();
    return this.bansAt.length;
  }
}
