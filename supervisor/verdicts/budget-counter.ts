import { LoginRateLimiter } from '../../shared/auth/login-rate-limiter.js';
import type { RateLimit } from '../../shared/config/values.js';

/** Which per-credential budget: CLIENT_REPORT_BUDGET (`report`) or CLIENT_BAN_BUDGET (`ban`). */
export type BudgetName = 'report' | 'ban';

/**
 * One per-credential budget, so many units per window. The verdicts spend it and ask it; on a
 * node of its own it is counted in memory (`localBudgetCounter`), on a node of a fleet across the
 * fleet (supervisor/fleet/fleet-budgets.ts makes these), which is why this port lives here: the
 * verdicts never import the fleet. Both calls answer at once: nothing on the way of a report or
 * of a connection's outcome waits for another process.
 */
export interface BudgetCounter {
  /** Spends one unit of `credential`'s budget; false (nothing spent) when this window's is gone. */
  take(credential: string, now: number): boolean;
  /** Whether `take` would succeed now; spends nothing. */
  wouldAllow(credential: string, now: number): boolean;
}

/** Makes the counter of one budget (the service passes the fleet's; absent, each is local). */
export type BudgetCounters = (budget: BudgetName, limit: RateLimit) => BudgetCounter;

/** A window per credential from its first unit, in bounded memory: the counter sign-ins use. */
export function localBudgetCounter(limit: RateLimit, maxTracked: number): BudgetCounter {
  const windows = new LoginRateLimiter(limit, maxTracked);
  return {
    take: (credential, now) => windows.attempt(credential, now).allowed,
    wouldAllow: (credential, now) => windows.wouldAllow(credential, now),
  };
}
