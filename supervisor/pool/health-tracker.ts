import type { HealthView } from '../../shared/api/views.js';
import type { HealthSnapshot } from '../health/health-snapshot.js';

import type { FailureKind, FailureOptions, FailureSource } from '../../shared/health/failure-kind.js';

export type { FailureKind, FailureOptions, FailureSource };

/**
 * What the pool needs of one instance's health (scoring, state machine, remediation).
 * Listeners: the pool subscribes to `onQuarantine` to move sessions at once, and to
 * `onAudit` to record quarantine and remediation events.
 */
export interface HealthTracker {
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
  /** Whether this failure would take the instance out of service now (nothing changes). */
  wouldQuarantine(kind: FailureKind, source: FailureSource, scored: boolean, now: number): boolean;
  /** The window's failures were answered without a quarantine (a site ban): they weigh nothing more. */
  settleWindow(now: number): void;
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
