import type { ExitBan } from './exit-bans.js';
import type { EgressProbeFailure } from './exit-egress.js';

/**
 * How the parts of the exits (the fleet's yields, the egress reactions, the sanctions) say what
 * they decided: the audit trail, and the events `ExitAssignments` emits to the pool and the
 * fleet. One announcer, so every part's decisions reach the same listeners the same way.
 */
export interface ExitAnnouncer {
  audit(instance: number | null, message: string, details: Record<string, unknown>, session?: string): void;
  /** These instances need another exit (a rotation). */
  exitGone(ids: number[]): void;
  /** An assignment changed: the fleet claims or releases its leases at once. */
  assignmentsChanged(): void;
  /** A probe through an exit failed in a way that is about the exit: evidence for supervisor/verdicts. */
  egressFailed(failure: EgressProbeFailure): void;
  /** A ban made here (not one applied from the fleet): the fleet shares it. */
  banned(ban: ExitBan): void;
  /** A ban lifted by hand here: the fleet lifts it everywhere. */
  lifted(fingerprint: string): void;
}

/** "instance 2" or "instances 1, 3": how the exits' audit messages name instances. */
export function instancesWord(ids: readonly number[]): string {
  return `instance${ids.length === 1 ? '' : 's'} ${ids.join(', ')}`;
}
