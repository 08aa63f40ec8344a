import type { EgressProbeFailure } from './exit-egress.js';

/**
 * How the parts of the exits (the fleet's yields, the egress reactions) say what they decided:
 * the audit trail, and the events `ExitAssignments` emits to the pool and the fleet. One
 * announcer, so every part's decisions reach the same listeners the same way.
 */
export interface ExitAnnouncer {
  audit(instance: number | null, message: string, details: Record<string, unknown>, session?: string): void;
  /** These instances need another exit (a rotation). */
  exitGone(ids: number[]): void;
  /** An assignment changed: the fleet claims or releases its leases at once. */
  assignmentsChanged(): void;
  /** A probe through an exit failed in a way that is about the exit: evidence for supervisor/verdicts. */
  egressFailed(failure: EgressProbeFailure): void;
}

/** "instance 2" or "instances 1, 3": how the exits' audit messages name instances. */
export function instancesWord(ids: readonly number[]): string {
  return `instance${ids.length === 1 ? '' : 's'} ${ids.join(', ')}`;
}
