import type { RateLimit } from '../config/values.js';
import { rateLimitKey } from './rate-limit-key.js';

/**
 * Most client addresses (buckets, see rate-limit-key.ts) the limiter remembers at once. Each
 * costs well under 200 bytes, so the cap holds the limiter to a few megabytes whatever the
 * traffic. Beyond it the oldest window is forgotten first: only someone already spreading
 * attempts over this many addresses can push an address out early, and they are not limited
 * by a per-address counter anyway.
 */
export const MAX_TRACKED_LOGIN_ADDRESSES = 10_000;

export type RateLimitDecision = { allowed: true } | { allowed: false; retryAfterSeconds: number };

interface Window {
  key: string;
  startedAt: number;
  attempts: number;
}

/**
 * Failed sign-ins per client address per fixed window (LOGIN_RATE_LIMIT = attempts/window).
 *
 * An attempt is counted when it starts (`attempt`), before the password is checked, and
 * forgiven when it succeeds (`succeeded`). Counting afterwards would let a burst of parallel
 * attempts all pass the check while their bcrypt comparisons are still running.
 */
export class LoginRateLimiter {
  private readonly windows = new Map<string, Window>();
  // Windows in the order they started, so the oldest is found in O(1). Entries whose window was
  // since forgotten stay here until they reach the front (skipped there) or a compaction. Not
  // done with the Map's own insertion order: V8 leaves deleted Map entries as holes that every
  // new iterator walks over, which made evicting from the front O(n) per call.
  private order: Window[] = [];
  private head = 0;

  constructor(
    private readonly limit: RateLimit,
    private readonly maxTrackedAddresses: number = MAX_TRACKED_LOGIN_ADDRESSES,
  ) {
    if (!(limit.attempts >= 1) || !(limit.windowMs >= 1)) throw new RangeError('rate limit needs attempts >= 1 and windowMs >= 1');
    if (!(maxTrackedAddresses >= 1)) throw new RangeError('maxTrackedAddresses must be >= 1');
  }

  get trackedAddresses(): number {
    return this.windows.size;
  }

  /** Counts one attempt from `address`, or refuses it with the seconds until the window ends. */
  attempt(address: string, now: number = Date.now()): RateLimitDecision {
    this.forgetExpired(now);
    const key = rateLimitKey(address);
    const current = this.windows.get(key);
    if (current !== undefined) {
      if (current.attempts >= this.limit.attempts) {
        return { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil((current.startedAt + this.limit.windowMs - now) / 1000)) };
      }
      current.attempts++;
      return { allowed: true };
    }
    while (this.windows.size >= this.maxTrackedAddresses) this.forgetOldest();
    const window: Window = { key, startedAt: now, attempts: 1 };
    this.windows.set(key, window);
    this.order.push(window);
    this.compact();
    return { allowed: true };
  }

  /** Whether an attempt from `address` would be allowed now; counts nothing. */
  wouldAllow(address: string, now: number = Date.now()): boolean {
    const current = this.windows.get(rateLimitKey(address));
    return current === undefined || now - current.startedAt >= this.limit.windowMs || current.attempts < this.limit.attempts;
  }

  /** A correct sign-in clears the address's failures. */
  succeeded(address: string): void {
    this.windows.delete(rateLimitKey(address));
  }

  private isLive(window: Window): boolean {
    return this.windows.get(window.key) === window;
  }

  private forgetExpired(now: number): void {
    while (this.head < this.order.length) {
      const window = this.order[this.head]!;
      if (this.isLive(window)) {
        if (now - window.startedAt < this.limit.windowMs) return;
        this.windows.delete(window.key);
      }
      this.head++;
    }
  }

  private forgetOldest(): void {
    while (this.head < this.order.length) {
      const window = this.order[this.head++]!;
      if (this.isLive(window)) {
        this.windows.delete(window.key);
        return;
      }
    }
  }

  /** Keeps `order` within a constant factor of the live windows. */
  private compact(): void {
    const queued = this.order.length - this.head;
    if (this.head > 1024 && this.head > queued) {
      this.order = this.order.slice(this.head);
      this.head = 0;
    }
    if (queued > 2 * this.windows.size + 1024) {
      this.order = this.order.slice(this.head).filter((w) => this.isLive(w));
      this.head = 0;
    }
  }
}
