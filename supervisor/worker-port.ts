import type { Logger } from '../shared/logger.js';
import type { DestinationProbe, DestinationProbeResult, RouteInvalidation } from '../shared/ipc/protocol.js';
import type { WorkerHandle, WorkerManager } from './cluster/worker-manager.js';
import { invalidateRouteLeases, probeDestinationThroughWorker } from './worker-ipc.js';

/**
 * The supervisor's way to its workers, bound once they are forked. The pool and the verdicts are
 * built before the workers (the workers' requests are answered by them), yet send to the workers
 * (lease invalidations, destination checks): they hold this port, which is bound in the start-up
 * stage that forks the workers, instead of closures over variables declared further down.
 * Before it is bound no worker exists: no lease is held anywhere, and no one can check a
 * destination.
 */
export class WorkerPort {
  private workers: WorkerManager | null = null;

  constructor(private readonly log: Logger) {}

  bind(workers: WorkerManager): void {
    if (this.workers) throw new Error('the worker port is bound once');
    this.workers = workers;
  }

  /** Every proxy worker drops the leases the invalidation names (WorkerManager: acknowledged by each). */
  invalidateRouteLeases(invalidation: RouteInvalidation): Promise<void> {
    return this.workers ? invalidateRouteLeases(this.workers, invalidation, this.log) : Promise.resolve();
  }

  /** A proxy worker dials the destination through the instance named; null when none can. */
  probeDestination(probe: DestinationProbe): Promise<DestinationProbeResult | null> {
    return this.workers ? probeDestinationThroughWorker(this.workers, probe, this.log) : Promise.resolve(null);
  }

  get restarts(): number {
    return this.workers?.restarts ?? 0;
  }

  handles(): WorkerHandle[] {
    return this.workers?.handles() ?? [];
  }
}
