/**
 * Runs async tasks one at a time in call order. The auth store saves auth.json through it so
 * that two mutations never interleave their writes and lose an update.
 */
export class SerialQueue {
  private tail: Promise<unknown> = Promise.resolve();
  private pendingCoalesced: Promise<void> | null = null;

  run<T>(task: () => Promise<T>): Promise<T> {
    const result = this.tail.then(task);
    // A failed task must not stop the ones queued after it.
    this.tail = result.catch(() => undefined);
    return result;
  }

  /**
   * Like `run`, but every call made while a coalesced task is still waiting for its turn shares
   * that task. Right for a task that saves "the state as it is when I start": ten revocations in
   * a burst cost one write, not ten fsync'd ones.
   */
  coalesced(task: () => Promise<void>): Promise<void> {
    if (this.pendingCoalesced !== null) return this.pendingCoalesced;
    const result = this.run(() => {
      this.pendingCoalesced = null;
      return task();
    });
    this.pendingCoalesced = result;
    return result;
  }

  /** Resolves once everything queued so far has finished (successfully or not). */
  idle(): Promise<void> {
    return this.tail.then(() => undefined);
  }
}
