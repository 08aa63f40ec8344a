/**
 * How long after a restart a restored session waits for its own instance to bootstrap before it
 * is moved to another: a tor that kept its DataDirectory bootstraps in seconds; one that needs
 * a fresh consensus can take a minute.
 */
export const RESTORED_INSTANCE_HOLD_MS = 60_000;

/**
 * After a restart, sessions the durable state put back on instances that are still starting
 * wait for them (RESTORED_INSTANCE_HOLD_MS at most) instead of moving to whichever instance
 * bootstrapped first: a move would cost them the exit IP the restart was meant to keep. Their
 * connections are refused meanwhile, as while the service itself was down.
 */
export class RestoredHolds {
  /** Instance → until when its restored sessions wait for it. */
  private readonly until = new Map<number, number>();

  hold(instances: readonly number[], now: number): void {
    for (const id of instances) this.until.set(id, now + RESTORED_INSTANCE_HOLD_MS);
  }

  /** The instance bootstrapped (or left): its sessions route normally from now on. */
  release(id: number): void {
    this.until.delete(id);
  }

  get active(): boolean {
    return this.until.size > 0;
  }

  /** Whether a session on `instance` must still wait for it at `now` (a hold past its end is dropped). */
  holds(instance: number, now: number): boolean {
    const until = this.until.get(instance);
    if (until === undefined) return false;
    if (now < until) return true;
    this.until.delete(instance);
    return false;
  }
}
