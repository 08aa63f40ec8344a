import type { FailureKind } from '../../shared/health/failure-kind.js';

/**
 * Weights of the failure kinds, derived from QUARANTINE_FAILURES (S, an integer >= 1), which is
 * also the quarantine score the weighted sum is compared against:
 *
 *   transport = other = 1          (S reads as "S unclassified failures", which is how QUARANTINE_FAILURES is documented)
 *   captcha      = max(S / 2, 3/2)  (two captchas always reach S; one stays below S for S >= 2)
 *   blocked      = (1 + captcha) / 2 (strictly between other and captcha)
 *   rate_limited = 1/4
 *
 * For S = 5: captcha 2.5, blocked 1.75, transport = other 1, rate_limited 0.25.
 * For S = 1, 2, 3: captcha 1.5, blocked 1.25. For S = 4: captcha 2, blocked 1.5.
 *
 * Why the 3/2 floor: S/2 alone is 1 for S = 2 (and 0.5 for S = 1), which would break
 * captcha > blocked > other. With the floor, captcha > blocked > 1 > 1/4 > 0 for every S, and
 * captcha < S whenever S >= 2, so no single report reaches S unless S is 1 (one report never quarantines a healthy instance unless QUARANTINE_FAILURES is 1).
 *
 * Rate limits: the exit works, it is only asked for too much. Their summed weight enters the
 * score capped at S / 2 (RATE_LIMITED_SHARE_OF_SCORE), so a flood of rate limits can bring an
 * instance at most half way to quarantine and never quarantines it alone, however many arrive
 * in the window, while a rate limit still "counts for less than one" as docs/configuration.md says of QUARANTINE_FAILURES.
 *
 * Every weight is a multiple of 1/4, so window sums are exact in binary floating point and the
 * comparison with S never suffers rounding.
 */

export const OTHER_WEIGHT = 1;
export const RATE_LIMITED_WEIGHT = 0.25;
/** A captcha weighs at least this much, so it stays above blocked (> 1) for small S. */
export const CAPTCHA_WEIGHT_FLOOR = 1.5;
/** The share of the quarantine score that rate limits together may fill. */
export const RATE_LIMITED_SHARE_OF_SCORE = 0.5;

export type FailureWeights = Readonly<Record<FailureKind, number>>;

/** What the failure window needs to weigh reports and what the machine compares them against. */
export interface ScoringRules {
  /** quarantine_score: the weighted sum in the window that quarantines. */
  readonly quarantineScore: number;
  readonly weights: FailureWeights;
  /** Ceiling of the rate limits' summed weight inside failure_score. */
  readonly rateLimitedCap: number;
}

function checkQuarantineFailures(quarantineFailures: number): void {
  if (!Number.isInteger(quarantineFailures) || quarantineFailures < 1) {
    throw new RangeError(`QUARANTINE_FAILURES must be an integer >= 1, got ${quarantineFailures}`);
  }
}

export function failureWeights(quarantineFailures: number): FailureWeights {
  checkQuarantineFailures(quarantineFailures);
  const captcha = Math.max(quarantineFailures / 2, CAPTCHA_WEIGHT_FLOOR);
  return {
    captcha,
    blocked: (OTHER_WEIGHT + captcha) / 2,
    transport: OTHER_WEIGHT,
    other: OTHER_WEIGHT,
    rate_limited: RATE_LIMITED_WEIGHT,
  };
}

export function scoringRules(quarantineFailures: number): ScoringRules {
  return {
    quarantineScore: quarantineFailures,
    weights: failureWeights(quarantineFailures),
    rateLimitedCap: quarantineFailures * RATE_LIMITED_SHARE_OF_SCORE,
  };
}
