import type { Logger } from '../shared/logger.js';
import type { DestinationProbe, DestinationProbeResult, EgressFetch, EgressFetchResult, RouteInvalidation } from '../shared/ipc/protocol.js';
import { errorMessage } from '../shared/errors/error-message.js';
import type { WorkerHandle, WorkerManager } from './cluster/worker-manager.js';
import { invalidateRouteLeases, probeDestinationThroughWorker } from './worker-ipc.js';

/** How often a fetch asked for before any proxy worker is up looks again. */
const WORKER_WAIT_STEP_MS = 100;
/** What the IPC round trip may add to a fetch's own deadline. */
const EGRESS_FETCH_IPC_MARGIN_MS = 2_000;

const FETCH_FAILURES: ReadonlySet<string> = new Set(['url', 'dial', 'socks', 'timeout', 'tls', 'http', 'too_large', 'broken']);

function isFetchResult(r: unknown, maxBytes: number): r is EgressFetchResult {
  if (typeof r !== 'object' || r === null) return false;
  const o = r as Record<string, unknown>;
  if (o.ok === true) return typeof o.status === 'number' && typeof o.body === 'string' && Buffer.byteLength(o.body) <= maxBytes;
  return o.ok === false && typeof o.failure === 'string' && FETCH_FAILURES.has(o.failure) && typeof o.detail === 'string';
}

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

  /**
   * A proxy worker GETs a URL through the instance named (supervisor/exits: an exit's egress
   * probe, the exit list); null when no worker can, or its answer is not one (the supervisor
   * trusts no worker's input: the body is checked against the size asked for).
   */
  async fetchThroughInstance(fetch: EgressFetch): Promise<EgressFetchResult | null> {
    // At start a tor can be ready before the proxy workers are: wait for one, within the fetch's time.
    const deadline = Date.now() + fetch.timeoutMs;
    let [h] = this.workers?.liveHandles('proxy') ?? [];
    while (!h && Date.now() + WORKER_WAIT_STEP_MS < deadline) {
      // Unref'd: a probe waiting for a worker never holds a stopping supervisor open.
      await new Promise((resolve) => setTimeout(resolve, WORKER_WAIT_STEP_MS).unref());
      [h] = this.workers?.liveHandles('proxy') ?? [];
    }
    if (!h) return null;
    try {
      const timeoutMs = Math.max(1, deadline - Date.now());
      const result = await h.endpoint.request('egress.fetch', { ...fetch, timeoutMs }, timeoutMs + EGRESS_FETCH_IPC_MARGIN_MS);
      return isFetchResult(result, fetch.maxBytes) ? result : null;
    } catch (e) {
      this.log.debug('egress fetch not answered', { slot: h.slot, error: errorMessage(e) });
      return null;
    }
  }

  get restarts(): number {
    return this.workers?.restarts ?? 0;
  }

  handles(): WorkerHandle[] {
    return this.workers?.handles() ?? [];
  }
}
