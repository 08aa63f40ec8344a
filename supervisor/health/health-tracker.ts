import type { EventEmitter } from 'node:events';
import type { HealthState, HealthView } from '../../shared/api/views.js';
import type { FailureKind, FailureOptions, FailureSource } from '../../shared/health/failure-kind.js';
import type { HealthAudit, QuarantineCause } from './health-machine.js';
import type { HealthSnapshot } from './health-snapshot.js';

export type { FailureKind, FailureOptions, FailureSource, QuarantineCause };

/**
 * What one instance's health tells whoever holds it: 'quarantine' (it left service on its own
 * scoring or by hand: move its sessions now, and let the verdicts decide what the exit earned),
 * 'audit' (a quarantine or remediation event, its message naming the instance), 'state'.
 */
export interface HealthEvents {
  quarantine: [cause: QuarantineCause];
  audit: [event: HealthAudit];
  /** Every change of state (diagnostics and tests). */
  state: [change: { from: HealthState; to: HealthState }];
}

/**
 * What the pool needs of one instance's health (scoring, state machine, remediation). Nothing
 * here waits: every method takes effect synchronously, and what follows is told as an event.
 */
export interface HealthTracker extends EventEmitter<HealthEvents> {
  view(): HealthView;
  /** healthy, degraded or probation. */
  routable(): boolean;
  bootstrapped(now: number): void;
  /** The instance stopped (died or restarting): back to starting unless mid-remediation. */
  unbootstrapped(now: number): void;
  /** Failures from rotationStarted until rotationEnded plus ROTATION_GRACE are not scored. */
  rotationStarted(now: number): void;
  rotationEnded(now: number): void;
  failure(kind: FailureKind, source: FailureSource, scored: boolean, now: number, options?: FailureOptions): void;
  /**
   * The pool's own evidence that the instance's current exit is dead (supervisor/tor/exit-liveness.ts):
   * on probation it quarantines (the remediation gave an exit that does not work), whatever a
   * rotation's grace says; in any other state nothing is weighed (the exit is replaced).
   */
  exitDown(now: number): void;
  /** Whether this failure would take the instance out of service now (nothing changes). */
  wouldQuarantine(kind: FailureKind, source: FailureSource, scored: boolean, now: number): boolean;
  /** The complaints about `site` were answered without a quarantine (a site ban): they weigh nothing more; the rest stays. */
  settleSite(site: string, now: number): void;
  /** endedAt: when the successful connection ended; it resets the failure run only if after the latest failure. */
  success(now: number, endedAt?: number): void;
  tick(now: number): void;
  /** false when the state makes a manual quarantine impossible (409). */
  quarantine(now: number): boolean;
  release(now: number): void;
  stop(): void;
  /** What the durable state keeps (supervisor/health/health-snapshot.ts). */
  persistable(): HealthSnapshot;
  /** Begins from a kept snapshot: called once, before the instance starts. */
  restore(snapshot: HealthSnapshot): void;
  lifetime(): { transport: number; client: number; byKind: Record<string, number>; remediations: number };
}
