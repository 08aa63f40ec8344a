/**
 * The live client connections each proxy worker holds, as its accounting batches report them,
 * next to MAX_CONNECTIONS_PER_WORKER: how close each worker is to refusing connections.
 */
export class WorkerLoad {
  private readonly connections = new Map<number, number>();

  record(slot: number, connections: number): void {
    this.connections.set(slot, connections);
  }

  /** A worker exited: its connections went with it. */
  forget(slot: number): void {
    this.connections.delete(slot);
  }

  connectionsOf(slot: number): number | null {
    return this.connections.get(slot) ?? null;
  }
}
