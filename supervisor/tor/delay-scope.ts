/**
 * Waits that an owner can cancel all at once (on stop or restart), so no timer outlives the
 * thing that started it. A cancelled wait resolves to false instead of rejecting.
 */
export class DelayScope {
  private readonly pending = new Set<{ timer: NodeJS.Timeout; resolve: (elapsed: boolean) => void }>();

  wait(ms: number): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      const entry = {
        resolve,
        timer: setTimeout(() => {
          this.pending.delete(entry);
          resolve(true);
        }, Math.max(0, ms)),
      };
      this.pending.add(entry);
    });
  }

  cancelAll(): void {
    for (const entry of this.pending) {
      clearTimeout(entry.timer);
      entry.resolve(false);
    }
    this.pending.clear();
  }

  get size(): number {
    return this.pending.size;
  }
}
