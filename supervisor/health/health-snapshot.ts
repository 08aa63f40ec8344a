import type { HealthState } from '../../shared/api/views.js';
import type { FailureKind } from '../../shared/health/failure-kind.js';
import { FailureTally } from './failure-tally.js';
import { initialHealthState, type HealthConfig, type HealthMachineState } from './health-machine.js';
import { RemediationLadder, type PlanCause, type RemediationPlan, type RemediationRung } from './remediation-ladder.js';

/**
 * What of an instance's health outlives a restart of the service: the failures still in the
 * window (with the current run), the ladder's position and its recurrence clock, the counts a
 * release clears, and the rung that was waiting or running, with when it was due. Not kept: the
 * process's own state (a restarted service starts every tor again) and the lifetime counters
 * (Prometheus counters start again at 0 with the process, as they must).
 */
export interface HealthSnapshot {
  state: HealthState;
  window: { at: number; kind: FailureKind; inRun: boolean }[];
  sinceRelease: { transport: number; client: number; byKind: Partial<Record<FailureKind, number>> };
  remediations: number;
  ladder: { rung: RemediationRung | null; attemptsAtRung: number; lastCompletedAt: number | null; active: boolean };
  /** The rung under way (quarantined or remediating): it resumes with what was left of its delay. */
  pending: { rung: RemediationRung; attempt: number; cause: PlanCause; dueAt: number } | null;
}

export function snapshotHealth(s: HealthMachineState, pending: { plan: RemediationPlan; dueAt: number } | null): HealthSnapshot {
  const underWay = s.state === 'quarantined' || s.state === 'remediating';
  return {
    state: s.state,
    window: s.window.entriesWithRun(),
    sinceRelease: { transport: s.sinceRelease.transport, client: s.sinceRelease.client, byKind: s.sinceRelease.byKind() },
    remediations: s.remediations,
    ladder: { rung: s.ladder.rung, attemptsAtRung: s.ladder.attemptsAtRung, lastCompletedAt: s.ladder.lastCompletedAt, active: s.ladder.active },
    pending: underWay && pending ? { rung: pending.plan.rung, attempt: pending.plan.attempt, cause: pending.plan.cause, dueAt: pending.dueAt } : null,
  };
}

/**
 * The machine state a restarted service begins an instance with, and the rung to resume (its
 * delay is what was left of it). A routable instance starts again as `starting` (its tor has not
 * bootstrapped yet) with its window: once it bootstraps it is degraded if failures remain. An
 * instance under remediation stays out of service and its rung runs again; on probation it stays
 * on probation.
 */
export function restoreHealth(snapshot: HealthSnapshot, config: HealthConfig, now: number): { state: HealthMachineState; resume: RemediationPlan | null } {
  const base = initialHealthState(config);
  let window = base.window;
  const cutoff = now - config.failureWindowMs;
  const live = snapshot.window.filter((e) => e.at > cutoff && e.at <= now);
  for (const e of live.filter((x) => !x.inRun)) window = window.add(e.at, e.kind);
  if (window.consecutive > 0) window = window.success();
  for (const e of live.filter((x) => x.inRun)) window = window.add(e.at, e.kind);
  const { rung, attemptsAtRung, lastCompletedAt, active } = snapshot.ladder;
  const underWay = (snapshot.state === 'quarantined' || snapshot.state === 'remediating') && snapshot.pending !== null && active;
  const state: HealthState = underWay ? 'quarantined' : snapshot.state === 'probation' ? 'probation' : 'starting';
  const pending = snapshot.pending;
  const resume: RemediationPlan | null =
    underWay && pending ? { rung: pending.rung, attempt: pending.attempt, cause: pending.cause, delayMs: Math.max(0, pending.dueAt - now) } : null;
  return {
    state: {
      ...base,
      state,
      window: state === 'quarantined' ? window.cleared() : window,
      sinceRelease: FailureTally.of(snapshot.sinceRelease.transport, snapshot.sinceRelease.client, snapshot.sinceRelease.byKind),
      remediations: snapshot.remediations,
      ladder: RemediationLadder.restored(rung, attemptsAtRung, lastCompletedAt, underWay),
    },
    resume,
  };
}
