import type { Config } from '../../shared/config/index.js';

/** Rungs in order of cost. `new_circuit` is the cheapest: a new circuit on the same tor. */
export const REMEDIATION_RUNGS = ['new_circuit', 'wipe_restart', 'restart_backoff'] as const;
export type RemediationRung = (typeof REMEDIATION_RUNGS)[number];
/** remediation_rung of the health object: `none` while no remediation is under way. */
export type RemediationRungName = RemediationRung | 'none';

/**
 * A failed attempt at new_circuit or wipe_restart is retried once before the ladder climbs:
 * one transient control-port error should not cost an identity. The last rung has nowhere to
 * climb and retries with its growing backoff instead, so an instance is never stranded.
 */
export const RUNG_ATTEMPTS_BEFORE_ESCALATION = 2;
/** Pause before retrying a cheap rung; long enough for a transient control-port error to pass. */
export const RUNG_RETRY_DELAY_MS = 5_000;

export type LadderConfig = Pick<Config, 'remediationBackoffBaseMs' | 'remediationBackoffMaxMs' | 'remediationRecurrenceWindowMs'>;

/** Why a rung is about to run. */
export type PlanCause = 'first' | 'recurrence' | 'retry' | 'escalation';

export interface RemediationPlan {
  readonly rung: RemediationRung;
  /** 1-based attempt at this rung; drives the backoff of restart_backoff. */
  readonly attempt: number;
  /** Wait before the rung runs; the instance stays out of service meanwhile. */
  readonly delayMs: number;
  readonly cause: PlanCause;
}

/** Delay of restart_backoff: min(base * 2^(attempt - 1), max). */
export function restartBackoffDelay(attempt: number, config: LadderConfig): number {
  const doublings = Math.min(Math.max(attempt - 1, 0), 40);
  return Math.min(config.remediationBackoffBaseMs * 2 ** doublings, config.remediationBackoffMaxMs);
}

function planFor(rung: RemediationRung, attempt: number, cause: PlanCause, config: LadderConfig): RemediationPlan {
  let delayMs = 0;
  if (rung === 'restart_backoff') delayMs = restartBackoffDelay(attempt, config);
  else if (cause === 'retry') delayMs = RUNG_RETRY_DELAY_MS;
  return { rung, attempt, delayMs, cause };
}

function nextRung(rung: RemediationRung): RemediationRung {
  const i = REMEDIATION_RUNGS.indexOf(rung);
  return REMEDIATION_RUNGS[Math.min(i + 1, REMEDIATION_RUNGS.length - 1)] as RemediationRung;
}

/**
 * The remediation ladder of one instance, as an immutable value. Escalation follows
 * recurrence, not history: a quarantine within REMEDIATION_RECURRENCE_WINDOW of the end of the
 * previous remediation climbs one rung (or, on the last rung, adds an attempt there and so
 * doubles its backoff); after a longer quiet spell the ladder starts again at new_circuit with
 * its attempts forgotten.
 */
export class RemediationLadder {
  private static readonly IDLE = new RemediationLadder(null, 0, null, false, 0);

  private constructor(
    /** Rung of the running remediation, or of the last one (kept to measure recurrence). */
    readonly rung: RemediationRung | null,
    readonly attemptsAtRung: number,
    /** When the last remediation completed (the instance went on probation). */
    readonly lastCompletedAt: number | null,
    /** A remediation is under way: between quarantine and probation. */
    readonly active: boolean,
    /** Rung runs begun in the current remediation; the first one counts a remediation. */
    readonly runsBegun: number,
  ) {}

  static idle(): RemediationLadder {
    return RemediationLadder.IDLE;
  }

  /** A ladder read back from the durable state. */
  static restored(rung: RemediationRung | null, attemptsAtRung: number, lastCompletedAt: number | null, active: boolean): RemediationLadder {
    return rung === null && lastCompletedAt === null && !active ? RemediationLadder.IDLE : new RemediationLadder(rung, attemptsAtRung, lastCompletedAt, active, 0);
  }

  /** What the health object shows: the rung while a remediation is under way, else none. */
  get rungName(): RemediationRungName {
    return this.active && this.rung !== null ? this.rung : 'none';
  }

  /** Quarantine at `now`: choose the rung for this remediation. */
  begin(now: number, config: LadderConfig): { ladder: RemediationLadder; plan: RemediationPlan } {
    const recurs =
      this.rung !== null && this.lastCompletedAt !== null && now - this.lastCompletedAt <= config.remediationRecurrenceWindowMs;
    if (!recurs) {
      const ladder = new RemediationLadder('new_circuit', 1, this.lastCompletedAt, true, 0);
      return { ladder, plan: planFor('new_circuit', 1, 'first', config) };
    }
    const previous = this.rung as RemediationRung;
    const rung = nextRung(previous);
    const attempt = rung === previous ? this.attemptsAtRung + 1 : 1;
    return { ladder: new RemediationLadder(rung, attempt, this.lastCompletedAt, true, 0), plan: planFor(rung, attempt, 'recurrence', config) };
  }

  /** A rung run has begun; `first` when it is the first of this remediation. */
  runBegun(): { ladder: RemediationLadder; first: boolean } {
    return {
      ladder: new RemediationLadder(this.rung, this.attemptsAtRung, this.lastCompletedAt, this.active, this.runsBegun + 1),
      first: this.runsBegun === 0,
    };
  }

  /** The rung worked: remember when, for recurrence. */
  completed(now: number): RemediationLadder {
    return new RemediationLadder(this.rung, this.attemptsAtRung, now, false, 0);
  }

  /** The rung failed: retry it (bounded) or climb; the last rung retries with a longer backoff. */
  failed(config: LadderConfig): { ladder: RemediationLadder; plan: RemediationPlan } {
    const rung = this.rung ?? 'new_circuit';
    let next: RemediationRung;
    let attempt: number;
    let cause: PlanCause;
    if (rung === 'restart_backoff' || this.attemptsAtRung < RUNG_ATTEMPTS_BEFORE_ESCALATION) {
      next = rung;
      attempt = this.attemptsAtRung + 1;
      cause = 'retry';
    } else {
      next = nextRung(rung);
      attempt = 1;
      cause = 'escalation';
    }
    return {
      ladder: new RemediationLadder(next, attempt, this.lastCompletedAt, true, this.runsBegun),
      plan: planFor(next, attempt, cause, config),
    };
  }

  /** Release: the operator vouches for the instance, so the ladder forgets its escalation too. */
  reset(): RemediationLadder {
    return RemediationLadder.IDLE;
  }
}
