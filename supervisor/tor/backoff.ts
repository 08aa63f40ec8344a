/** Exponential backoff with a ceiling: initial, 2×, 4×, … capped at max. */
export class Backoff {
  private attempts = 0;

  constructor(
    readonly initialMs: number,
    readonly maxMs: number,
  ) {
    if (!(initialMs > 0) || !(maxMs >= initialMs)) throw new RangeError('backoff needs 0 < initialMs <= maxMs');
  }

  /** Delay before the next attempt; each call counts as one attempt. */
  next(): number {
    const delay = Math.min(this.maxMs, this.initialMs * 2 ** Math.min(this.attempts, 30));
    this.attempts++;
    return delay;
  }

  get attemptCount(): number {
    return this.attempts;
  }

  reset(): void {
    this.attempts = 0;
  }
}
