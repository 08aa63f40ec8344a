/**
 * Control-port events this process received, by event name (CIRC, STREAM, STATUS_CLIENT, …),
 * over every instance and every control connection since start: the rate at which tor keeps the
 * supervisor busy, which grows with the pool and with the traffic while STREAM events are
 * followed (`pool_tor_control_events_total`, docs/performance.md "A pool of 40").
 */
export class ControlEventTally {
  private readonly counts = new Map<string, number>();

  note(name: string): void {
    this.counts.set(name, (this.counts.get(name) ?? 0) + 1);
  }

  /** Counts so far by event name. */
  snapshot(): ReadonlyMap<string, number> {
    return new Map(this.counts);
  }
}

/** The process's tally: every TorControlClient counts into it unless given another. */
export const controlEventTally = new ControlEventTally();
