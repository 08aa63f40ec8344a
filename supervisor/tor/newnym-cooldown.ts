/**
 * tor accepts one NEWNYM per ~10 s; a later one is delayed by tor yet still answered 250 at once,
 * so the caller cannot tell from the reply. The cooldown is therefore tracked here, client-side.
 */
export const NEWNYM_COOLDOWN_MS = 10_000;

export class NewnymCooldown {
  private lastSentAt: number | undefined;

  constructor(readonly intervalMs = NEWNYM_COOLDOWN_MS) {}

  /** Milliseconds to wait before the next NEWNYM takes effect at once (0 when allowed now). */
  msUntilAllowed(now: number): number {
    if (this.lastSentAt === undefined) return 0;
    return Math.max(0, this.lastSentAt + this.intervalMs - now);
  }

  /** The moment the cooldown ends, or undefined if no NEWNYM was sent yet. */
  endsAt(): number | undefined {
    return this.lastSentAt === undefined ? undefined : this.lastSentAt + this.intervalMs;
  }

  markSent(now: number): void {
    this.lastSentAt = now;
  }

  /** A new tor process has no rate-limit memory. */
  reset(): void {
    this.lastSentAt = undefined;
  }
}
