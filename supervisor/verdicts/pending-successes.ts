/**
 * How long the success of a request through a session waits before health sees it. A client
 * that sees a block page inside a successful response reports it after the fact; within this
 * grace its report cancels the success of the request it is about, so the scraper's loop
 * "request, report" keeps its consecutive count however the accounting batch and the report
 * race. A success with no report simply counts this much later.
 */
export const SUCCESS_REPORT_GRACE_MS = 2_000;

/**
 * Successes held per instance and session key (the latest one of each key: an older one would be
 * older than any report that follows, and health ignores a success older than the latest failure).
 */
export class PendingSuccesses {
  private readonly byInstance = new Map<number, Map<string, number>>();

  hold(instance: number, key: string, endedAt: number): void {
    let held = this.byInstance.get(instance);
    if (!held) this.byInstance.set(instance, (held = new Map()));
    held.set(key, Math.max(endedAt, held.get(key) ?? Number.NEGATIVE_INFINITY));
  }

  /** A failure report about `key` at `at`: the held success of the request it is about is not one. */
  reported(instance: number, key: string, at: number): void {
    const held = this.byInstance.get(instance);
    const endedAt = held?.get(key);
    if (held && endedAt !== undefined && endedAt <= at) held.delete(key);
  }

  /** Hands every success whose grace is over to `apply` (oldest first per instance) and forgets it. */
  release(now: number, apply: (instance: number, endedAt: number) => void): void {
    for (const [instance, held] of this.byInstance) {
      const due: number[] = [];
      for (const [key, endedAt] of held) {
        if (now - endedAt < SUCCESS_REPORT_GRACE_MS) continue;
        due.push(endedAt);
        held.delete(key);
      }
      due.sort((a, b) => a - b);
      for (const endedAt of due) apply(instance, endedAt);
      if (held.size === 0) this.byInstance.delete(instance);
    }
  }

  forgetInstance(instance: number): void {
    this.byInstance.delete(instance);
  }

  get size(): number {
    let n = 0;
    for (const held of this.byInstance.values()) n += held.size;
    return n;
  }
}
