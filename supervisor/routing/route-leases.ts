import type { RouteInvalidation } from '../../shared/ipc/protocol.js';

/** How long one proxy worker may take to acknowledge an invalidation before the API answers anyway. */
export const LEASE_INVALIDATION_TIMEOUT_MS = 2000;

/**
 * Delivers an invalidation to every proxy worker; resolves once each acknowledged, is gone, or
 * ran out of LEASE_INVALIDATION_TIMEOUT_MS (it reports that itself, per worker): never rejects.
 */
export type InvalidationSender = (invalidation: RouteInvalidation) => Promise<void>;

/**
 * The supervisor's half of route leases (README.md here). The pool grants a worker a lease
 * with a route; from then on the worker routes the key's connections itself, so every change
 * that would make the pool answer differently must reach the workers: a session that moved or
 * left (its key), and an instance that stopped taking traffic (every lease on it).
 *
 * Changes are collected and sent together once the current event-loop turn is over, so a
 * rebalance or an expiry of many sessions is one message per worker. An operation the API
 * answers awaits `settled()`, which sends what is pending at once and resolves when every
 * worker has dropped it: the API's answer is then in force for the client's next connection.
 */
export class RouteLeases {
  private pendingKeys = new Set<string>();
  private pendingInstances = new Set<number>();
  /** Instances some worker may hold a lease on (granted since they last left the routable set). */
  private readonly leasedOn = new Set<number>();
  private scheduled: NodeJS.Immediate | null = null;
  private readonly inFlight = new Set<Promise<void>>();

  constructor(private readonly send: InvalidationSender) {}

  /** A lease on `instance` was granted. */
  granted(instance: number): void {
    this.leasedOn.add(instance);
  }

  /** The session of `key` moved or left the table. */
  sessionChanged(key: string): void {
    this.pendingKeys.add(key);
    this.schedule();
  }

  /**
   * The instances that take traffic now: leases on any other one are dropped. Called after every
   * change that can take an instance out of service, and every tick as a safety net.
   */
  routableNow(routable: readonly number[]): void {
    for (const id of this.leasedOn) {
      if (routable.includes(id)) continue;
      this.leasedOn.delete(id);
      this.pendingInstances.add(id);
    }
    if (this.pendingInstances.size > 0) this.schedule();
  }

  /** Sends what is pending now; resolves once every invalidation sent so far is acknowledged. */
  settled(): Promise<void> {
    this.flush();
    return Promise.all([...this.inFlight]).then(() => undefined);
  }

  /** Drops a scheduled send (shutdown: the workers are going away). */
  stop(): void {
    if (this.scheduled) clearImmediate(this.scheduled);
    this.scheduled = null;
  }

  private schedule(): void {
    this.scheduled ??= setImmediate(() => this.flush());
  }

  private flush(): void {
    if (this.scheduled) clearImmediate(this.scheduled);
    this.scheduled = null;
    if (this.pendingKeys.size === 0 && this.pendingInstances.size === 0) return;
    const invalidation: RouteInvalidation = { keys: [...this.pendingKeys], instances: [...this.pendingInstances] };
    this.pendingKeys = new Set();
    this.pendingInstances = new Set();
    const delivery = this.send(invalidation);
    this.inFlight.add(delivery);
    void delivery.finally(() => this.inFlight.delete(delivery));
  }
}
