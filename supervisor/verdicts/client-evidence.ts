import type { Logger } from '../../shared/logger.js';
import type { RateLimit, RoutableFloor } from '../../shared/config/values.js';
import { routableFloorFor } from '../../shared/config/values.js';
import type { FailureReporter } from '../../shared/ipc/protocol.js';
import { ThrottledWarning } from '../../shared/logging/throttled-warning.js';
import { localBudgetCounter, type BudgetCounter } from './budget-counter.js';

/**
 * Guards against one client taking the pool out of service with evidence it controls: failure
 * reports it sends, and failures of destinations it chooses (closed ports, names that do not
 * resolve) that a check blamed on the exit. Two guards:
 *
 * - a budget of scored reports per credential (CLIENT_REPORT_BUDGET), which those destination
 *   failures spend too: beyond it, reports are answered, counted and audited, but weigh nothing
 *   (they still move the reporter's own session);
 * - a floor of routable instances (MIN_ROUTABLE): such evidence never quarantines an instance
 *   when that would leave fewer routable. The proxy's own evidence that a tor is unreachable
 *   (it could not even reach the instance's SOCKS port) is not the client's, and still does.
 */

/** Reporters the budget remembers at once (each under 200 bytes); beyond it the oldest window is forgotten. */
export const MAX_TRACKED_REPORTERS = 10_000;

export type Reporter = FailureReporter;

export function reporterKey(r: Reporter): string {
  switch (r.kind) {
    case 'token':
      return `token:${r.id}`;
    case 'sign-in':
      return `sign-in:${r.user}`;
    case 'address':
      return `address:${r.ip}`;
  }
}

export class ReportBudget {
  private readonly windows: BudgetCounter;

  constructor(
    limit: RateLimit,
    private readonly now: () => number,
    /** Counted across a fleet (budget-counter.ts); absent: a fixed window per key in this node's memory. */
    counter?: BudgetCounter,
  ) {
    this.windows = counter ?? localBudgetCounter(limit, MAX_TRACKED_REPORTERS);
  }

  /** Spends one scored report of `reporter`; false when its budget for this window is gone. */
  take(reporter: Reporter): boolean {
    return this.takeCredential(reporterKey(reporter));
  }

  /** The same for a connection's credential (`token:<id>`, `address:<ip>`): a failure of the destination it chose, blamed on the exit. */
  takeCredential(credential: string): boolean {
    return this.windows.take(credential, this.now());
  }
}

export class RoutableFloorGuard {
  private readonly withheld: ThrottledWarning;

  constructor(
    private readonly floor: RoutableFloor,
    log: Logger,
  ) {
    this.withheld = new ThrottledWarning(log, 'quarantine withheld: it would leave fewer routable instances than MIN_ROUTABLE', { level: 'info' });
  }

  /** Whether client-dependent evidence may quarantine one of `routable` routable instances of a pool of `size`. */
  allows(routable: number, size: number, instance: number): boolean {
    const floor = routableFloorFor(this.floor, size);
    if (routable - 1 >= floor) return true;
    this.withheld.note({ instance, routable, floor });
    return false;
  }

  flush(): void {
    this.withheld.flush();
  }
}
