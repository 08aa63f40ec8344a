import type { HealthState, HealthView } from '../../shared/api/views.js';
import type { Config } from '../../shared/config/index.js';
import type { FailureKind, FailureSource } from '../../shared/health/failure-kind.js';
import { FailureTally } from './failure-tally.js';
import { FailureWindow } from './failure-window.js';
import { RemediationLadder, type LadderConfig, type RemediationPlan, type RemediationRungName } from './remediation-ladder.js';
import { scoringRules } from './weights.js';

export type { HealthState } from '../../shared/api/views.js';

export type HealthConfig = Pick<Config, 'quarantineFailures' | 'quarantineConsecutive' | 'failureWindowMs' | 'rotationGraceMs'> & LadderConfig;

/** States that take traffic (the pool also requires the process to be ready and not rotating). */
export const ROUTABLE_STATES: readonly HealthState[] = ['healthy', 'degraded', 'probation'];

export function isRoutableState(state: HealthState): boolean {
  return ROUTABLE_STATES.includes(state);
}

/** Everything the machine knows about one instance. Immutable: the reducer returns a new one. */
export interface HealthMachineState {
  readonly state: HealthState;
  /** The process has bootstrapped and has not died or restarted since. */
  readonly bootstrapped: boolean;
  readonly window: FailureWindow;
  /** Scored failures since the last release: transport_failures, client_failures, failures_by_kind. */
  readonly sinceRelease: FailureTally;
  /** Every failure ever, scored or not: the metrics' counters. */
  readonly lifetime: FailureTally;
  /** Failures not held against the instance (private destinations, rotation windows). */
  readonly unscored: number;
  /** Remediations begun, ever. */
  readonly remediations: number;
  readonly ladder: RemediationLadder;
  /** Mid-rotation: failures are not the instance's fault until rotationGraceUntil. */
  readonly rotating: boolean;
  readonly rotationGraceUntil: number;
}

export type HealthEvent =
  | { type: 'bootstrapped' }
  /** The process died or is restarting outside a remediation. */
  | { type: 'unbootstrapped' }
  /** scored=false: not the exit's fault by the caller's knowledge (a private destination). */
  /**
   * occurredAt: when it happened (a connection's end), if before the event is handled.
   * mayQuarantine=false: weigh it, but it must not take the instance out of service (the pool's
   * routable floor, MIN_ROUTABLE, for evidence that depends on the client).
   */
  | { type: 'failure'; kind: FailureKind; source: FailureSource; scored: boolean; occurredAt?: number; mayQuarantine?: boolean; site?: string }
  /** endedAt: when the successful connection ended; a success older than the latest failure resets nothing. */
  | { type: 'success'; endedAt?: number }
  /** Time passed: the window slides. */
  | { type: 'tick' }
  | { type: 'manualQuarantine' }
  | { type: 'release' }
  /**
   * The complaints about one site have been answered without taking the instance out of service
   * (a ban for that site; the sessions that reached it left): they weigh nothing more. Every other
   * failure in the window stays.
   */
  | { type: 'siteSettled'; site: string }
  | { type: 'rotationStarted' }
  | { type: 'rotationEnded' }
  /**
   * The pool's own evidence that the exit the instance leaves through now is dead
   * (supervisor/tor/exit-liveness.ts). About the current exit, so a rotation's grace does not
   * apply; it quarantines only on probation (below).
   */
  | { type: 'exitDown' }
  /** The executor's wait is over and the rung's action starts. */
  | { type: 'remediationBegan' }
  | { type: 'remediationRungDone' }
  | { type: 'remediationRungFailed'; error: string };

export type QuarantineCause = 'score' | 'consecutive' | 'probation' | 'manual';

export interface HealthAudit {
  type: 'quarantine' | 'remediation';
  message: string;
  details: Record<string, unknown>;
}

export type HealthEffect =
  /** Move the instance's sessions elsewhere now. */
  | { type: 'moveSessions'; cause: QuarantineCause }
  /** Run one rung after plan.delayMs, then report remediationBegan and Done or Failed. */
  | { type: 'startRemediation'; plan: RemediationPlan }
  /** Abandon the rung that is waiting or running; its outcome must be ignored. */
  | { type: 'cancelRemediation' }
  | { type: 'audit'; audit: HealthAudit };

export interface HealthRefusal {
  /** The action is impossible in this state: an API answers 409. */
  reason: string;
}

export interface HealthTransition {
  state: HealthMachineState;
  effects: HealthEffect[];
  /** Set when the event was an operator action the state does not allow. */
  refused?: HealthRefusal;
}

export function initialHealthState(config: HealthConfig): HealthMachineState {
  return {
    state: 'starting',
    bootstrapped: false,
    window: FailureWindow.empty(config.failureWindowMs, scoringRules(config.quarantineFailures)),
    sinceRelease: FailureTally.empty(),
    lifetime: FailureTally.empty(),
    unscored: 0,
    remediations: 0,
    ladder: RemediationLadder.idle(),
    rotating: false,
    rotationGraceUntil: Number.NEGATIVE_INFINITY,
  };
}

/** The rung while the instance is being worked on, probation included (it shows what was tried). */
function rungShown(s: HealthMachineState): RemediationRungName {
  const underRemediation = s.state === 'quarantined' || s.state === 'remediating' || s.state === 'probation';
  return underRemediation && s.ladder.rung !== null ? s.ladder.rung : 'none';
}

export function healthView(s: HealthMachineState): HealthView {
  return {
    state: s.state,
    failures_in_window: s.window.size,
    consecutive_failures: s.window.consecutive,
    failure_score: s.window.score,
    quarantine_score: s.window.rules.quarantineScore,
    transport_failures: s.sinceRelease.transport,
    client_failures: s.sinceRelease.client,
    failures_by_kind: s.sinceRelease.byKind(),
    remediations: s.remediations,
    remediation_rung: rungShown(s),
  };
}

/** Which threshold a window has reached, if any. */
function thresholdReached(window: FailureWindow, config: HealthConfig): 'score' | 'consecutive' | null {
  if (window.score >= window.rules.quarantineScore) return 'score';
  if (window.consecutive >= config.quarantineConsecutive) return 'consecutive';
  return null;
}

function quarantineMessage(cause: QuarantineCause, s: HealthMachineState, config: HealthConfig, kind?: FailureKind, exitDown = false): string {
  switch (cause) {
    case 'score':
      return `quarantined: failure score ${s.window.score} reached ${s.window.rules.quarantineScore}`;
    case 'consecutive':
      return `quarantined: ${s.window.consecutive} consecutive failures reached ${config.quarantineConsecutive}`;
    case 'probation':
      return exitDown
        ? 'quarantined: the exit it was given died on probation (the pool’s own evidence), the remediation did not work'
        : `quarantined: ${kind ?? 'a'} failure on probation, the remediation did not work`;
    case 'manual':
      return 'quarantined by an operator';
  }
}

function planText(plan: RemediationPlan): string {
  return plan.delayMs > 0 ? `${plan.rung} (attempt ${plan.attempt}) in ${plan.delayMs} ms` : `${plan.rung} (attempt ${plan.attempt})`;
}

function planDetails(plan: RemediationPlan): Record<string, unknown> {
  return { rung: plan.rung, attempt: plan.attempt, delay_ms: plan.delayMs, ladder_step: plan.cause };
}

/** Into quarantine: sessions move, the ladder chooses a rung (quarantined -> remediating is automatic). */
function quarantine(
  s: HealthMachineState,
  cause: QuarantineCause,
  now: number,
  config: HealthConfig,
  effects: HealthEffect[],
  kind?: FailureKind,
  exitDown = false,
): HealthMachineState {
  const { ladder, plan } = s.ladder.begin(now, config);
  effects.push({ type: 'moveSessions', cause });
  effects.push({
    type: 'audit',
    audit: {
      type: 'quarantine',
      message: `${quarantineMessage(cause, s, config, kind, exitDown)}; remediation ${planText(plan)}`,
      details: {
        cause,
        ...(kind ? { kind } : {}),
        ...(exitDown ? { exit_down: true } : {}),
        failure_score: s.window.score,
        quarantine_score: s.window.rules.quarantineScore,
        consecutive_failures: s.window.consecutive,
        failures_in_window: s.window.size,
        ...planDetails(plan),
      },
    },
  });
  effects.push({ type: 'startRemediation', plan });
  return { ...s, state: 'quarantined', ladder };
}

function onFailure(
  s: HealthMachineState,
  event: Extract<HealthEvent, { type: 'failure' }>,
  now: number,
  config: HealthConfig,
  effects: HealthEffect[],
): HealthMachineState {
  const lifetime = s.lifetime.add(event.source, event.kind);
  const blamed = event.scored && !s.rotating && now >= s.rotationGraceUntil;
  if (!blamed) return { ...s, lifetime, unscored: s.unscored + 1 };
  const counted: HealthMachineState = { ...s, lifetime, sinceRelease: s.sinceRelease.add(event.source, event.kind) };
  // Out of service (starting, quarantined, remediating): late failures of connections opened
  // before are counted but weigh nothing; the window is cleared before the instance serves again.
  if (!isRoutableState(s.state)) return counted;
  const window = s.window.add(now, event.kind, Math.min(now, event.occurredAt ?? now), event.site);
  const next: HealthMachineState = { ...counted, window, state: s.state === 'healthy' ? 'degraded' : s.state };
  if (event.mayQuarantine === false) return next;
  if (s.state === 'probation') {
    return event.kind === 'rate_limited' ? next : quarantine(next, 'probation', now, config, effects, event.kind);
  }
  // One report never quarantines a healthy instance unless QUARANTINE_FAILURES is 1.
  // A healthy instance's window is empty, so this report is all there is in it; with
  // QUARANTINE_FAILURES >= 2 no weight reaches the score alone, and the guard below keeps
  // QUARANTINE_CONSECUTIVE=1 from doing it either.
  if (s.state === 'healthy' && config.quarantineFailures !== 1) return next;
  const reached = thresholdReached(window, config);
  return reached ? quarantine(next, reached, now, config, effects, event.kind) : next;
}

function released(s: HealthMachineState, effects: HealthEffect[]): HealthMachineState {
  if (s.state === 'quarantined' || s.state === 'remediating') {
    effects.push({ type: 'cancelRemediation' });
    effects.push({
      type: 'audit',
      audit: { type: 'remediation', message: `remediation at ${s.ladder.rungName} cancelled by release`, details: { rung: s.ladder.rungName } },
    });
  }
  return {
    ...s,
    state: s.bootstrapped ? 'healthy' : 'starting',
    window: s.window.cleared(),
    sinceRelease: FailureTally.empty(),
    ladder: s.ladder.reset(),
  };
}

function step(s: HealthMachineState, event: HealthEvent, now: number, config: HealthConfig, effects: HealthEffect[]): HealthTransition {
  switch (event.type) {
    case 'tick':
      return { state: s, effects };
    case 'bootstrapped':
      return { state: { ...s, bootstrapped: true, state: s.state === 'starting' ? 'healthy' : s.state }, effects };
    case 'unbootstrapped': {
      // A restart ends any rotation; without this, failures would stay unscored forever.
      const rotation = s.rotating ? { rotating: false, rotationGraceUntil: now + config.rotationGraceMs } : {};
      // Remediation restarts the process itself: the ladder keeps the instance.
      const state = isRoutableState(s.state) ? 'starting' : s.state;
      return { state: { ...s, ...rotation, bootstrapped: false, state }, effects };
    }
    case 'failure':
      return { state: onFailure(s, event, now, config, effects), effects };
    case 'success': {
      const window = s.window.success(Math.min(now, event.endedAt ?? now));
      const next = { ...s, window };
      if (s.state !== 'probation') return { state: next, effects };
      // A stale success (ended before the failure that followed it) passes no probation.
      if (window === s.window && s.window.consecutive > 0) return { state: s, effects };
      // Nor does one that ended before the probation began (a session's success is handed in a
      // SUCCESS_REPORT_GRACE_MS later): it went through the exit the remediation replaced.
      const probationSince = s.ladder.lastCompletedAt;
      if (event.endedAt !== undefined && probationSince !== null && event.endedAt < probationSince) return { state: next, effects };
      effects.push({
        type: 'audit',
        audit: { type: 'remediation', message: `probation passed after ${s.ladder.rung ?? 'remediation'}; back in service`, details: { rung: s.ladder.rung } },
      });
      return { state: { ...next, state: 'healthy' }, effects };
    }
    case 'manualQuarantine':
      if (!isRoutableState(s.state)) {
        return { state: s, effects, refused: { reason: `instance is ${s.state}; only a healthy, degraded or probation instance can be quarantined` } };
      }
      return { state: quarantine(s, 'manual', now, config, effects), effects };
    case 'release':
      return { state: released(s, effects), effects };
    case 'siteSettled': {
      if (!isRoutableState(s.state)) return { state: s, effects };
      const window = s.window.withoutSite(event.site);
      // Degraded only while something is left to weigh.
      return { state: { ...s, window, state: s.state === 'degraded' && window.isEmpty ? 'healthy' : s.state }, effects };
    }
    case 'rotationStarted':
      return { state: { ...s, rotating: true }, effects };
    case 'rotationEnded':
      return { state: { ...s, rotating: false, rotationGraceUntil: now + config.rotationGraceMs }, effects };
    case 'exitDown': {
      // Elsewhere the exit is replaced and the instance is not to blame: nothing is weighed.
      if (s.state !== 'probation') return { state: s, effects };
      // On probation it is the SPEC's "a failure": the exit the remediation gave does not work.
      const counted: HealthMachineState = {
        ...s,
        lifetime: s.lifetime.add('transport', 'transport'),
        sinceRelease: s.sinceRelease.add('transport', 'transport'),
      };
      return { state: quarantine(counted, 'probation', now, config, effects, 'transport', true), effects };
    }
    case 'remediationBegan': {
      if (s.state !== 'quarantined' && s.state !== 'remediating') return { state: s, effects };
      const { ladder, first } = s.ladder.runBegun();
      effects.push({
        type: 'audit',
        audit: {
          type: 'remediation',
          message: `remediation: ${s.ladder.rungName} (attempt ${s.ladder.attemptsAtRung})`,
          details: { rung: s.ladder.rungName, attempt: s.ladder.attemptsAtRung },
        },
      });
      return { state: { ...s, state: 'remediating', ladder, remediations: s.remediations + (first ? 1 : 0) }, effects };
    }
    case 'remediationRungDone': {
      if (s.state !== 'remediating') return { state: s, effects };
      effects.push({
        type: 'audit',
        audit: {
          type: 'remediation',
          message: `remediation ${s.ladder.rungName} done; on probation until a request survives`,
          details: { rung: s.ladder.rungName, attempt: s.ladder.attemptsAtRung },
        },
      });
      // The failures in the window blamed the exit the rung has just replaced.
      return {
        state: { ...s, state: 'probation', bootstrapped: true, window: s.window.cleared(), ladder: s.ladder.completed(now) },
        effects,
      };
    }
    case 'remediationRungFailed': {
      if (s.state !== 'remediating' && s.state !== 'quarantined') return { state: s, effects };
      const failedRung = s.ladder.rungName;
      const { ladder, plan } = s.ladder.failed(config);
      const what = plan.cause === 'retry' ? 'retrying' : 'escalating to';
      effects.push({
        type: 'audit',
        audit: {
          type: 'remediation',
          message: `remediation ${failedRung} failed (${event.error}); ${what} ${planText(plan)}`,
          details: { failed_rung: failedRung, error: event.error, ...planDetails(plan) },
        },
      });
      effects.push({ type: 'startRemediation', plan });
      return { state: { ...s, state: 'remediating', ladder }, effects };
    }
  }
}

/**
 * The health state machine of one instance as a pure reducer. The window slides to `now` first,
 * then the event applies, then degraded and healthy are kept honest: healthy means no failure
 * in the window, degraded means some.
 */
export function reduceHealth(s: HealthMachineState, event: HealthEvent, now: number, config: HealthConfig): HealthTransition {
  const window = s.window.expire(now);
  const slid = window === s.window ? s : { ...s, window };
  const result = step(slid, event, now, config, []);
  const next = result.state;
  if (next.state === 'degraded' && next.window.isEmpty) result.state = { ...next, state: 'healthy' };
  else if (next.state === 'healthy' && !next.window.isEmpty) result.state = { ...next, state: 'degraded' };
  return result;
}
