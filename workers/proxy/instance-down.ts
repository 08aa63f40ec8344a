/**
 * Tells the dials of a proxy worker that an instance stopped answering (the supervisor's
 * liveness probe, broadcast as 'instance-down'). A frozen tor still accepts TCP on its SocksPort,
 * so a dial already waiting on it would otherwise wait out the dial deadline; a watched dial is
 * aborted at once and re-routed (see the listeners).
 */
export class InstanceDownSignal {
  private readonly watchers = new Map<number, Set<() => void>>();

  /** Calls `onDown` if the instance is reported down before the returned function is called. */
  watch(instanceId: number, onDown: () => void): () => void {
    let set = this.watchers.get(instanceId);
    if (!set) {
      set = new Set();
      this.watchers.set(instanceId, set);
    }
    set.add(onDown);
    return () => {
      const current = this.watchers.get(instanceId);
      if (!current) return;
      current.delete(onDown);
      if (current.size === 0) this.watchers.delete(instanceId);
    };
  }

  markDown(instanceId: number): void {
    const set = this.watchers.get(instanceId);
    if (!set) return;
    this.watchers.delete(instanceId);
    for (const onDown of set) onDown();
  }

  /** Dials being watched now (for tests and leak checks). */
  get size(): number {
    let n = 0;
    for (const set of this.watchers.values()) n += set.size;
    return n;
  }
}
