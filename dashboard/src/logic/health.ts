import type { HealthState, HealthView, InstanceView } from '../../../shared/api/views.js';

/** Every state, in the order the dashboard lists them (best first). */
export const HEALTH_STATES: readonly HealthState[] = ['healthy', 'degraded', 'probation', 'starting', 'remediating', 'quarantined'];

export type StateCounts = Record<HealthState, number>;

export function countByState(instances: readonly InstanceView[]): StateCounts {
  const counts: StateCounts = { starting: 0, healthy: 0, degraded: 0, probation: 0, quarantined: 0, remediating: 0 };
  for (const i of instances) counts[i.health.state] += 1;
  return counts;
}

/** How close the instance is to quarantine, 0 to 1 (failure_score / quarantine_score, clamped). */
export function quarantineFraction(h: Pick<HealthView, 'failure_score' | 'quarantine_score'>): number {
  if (!(h.quarantine_score > 0)) return 0;
  return Math.min(1, Math.max(0, h.failure_score / h.quarantine_score));
}

/** Bar colour band for a fraction: calm below half, warning up to 80 %, danger above. */
export function pressureLevel(fraction: number): 'low' | 'medium' | 'high' {
  if (fraction >= 0.8) return 'high';
  if (fraction >= 0.5) return 'medium';
  return 'low';
}

/** Whether the instance takes traffic (the states the pool routes to). */
export function isRoutableState(state: HealthState): boolean {
  return state === 'healthy' || state === 'degraded' || state === 'probation';
}

/** "captcha 2, blocked 1" — kinds sorted by count, then name. Empty when none were seen. */
export function formatFailureKinds(byKind: Readonly<Record<string, number>>): string {
  return Object.entries(byKind)
    .filter(([, n]) => n > 0)
    .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
    .map(([k, n]) => `${k} ${n}`)
    .join(', ');
}
