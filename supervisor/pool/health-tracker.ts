import type { HealthView } from '../../shared/api/views.js';

export type FailureKind = 'captcha' | 'blocked' | 'transport' | 'other' | 'rate_limited';
export type FailureSource = 'transport' | 'client';

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
  failure(kind: FailureKind, source: FailureSource, scored: boolean, now: number): void;
  success(now: number): void;
  tick(now: number): void;
  /** false when the state makes a manual quarantine impossible (409). */
  quarantine(now: number): boolean;
  release(now: number): void;
  stop(): void;
  lifetime(): { transport: number; client: number; byKind: Record<string, number>; remediations: number };
}
