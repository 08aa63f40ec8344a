import { createHash } from 'node:crypto';
import type { RateLimit } from '../config/values.js';
import { LoginRateLimiter, MAX_TRACKED_LOGIN_ADDRESSES, type RateLimitDecision } from './login-rate-limiter.js';
import { rateLimitKey } from './rate-limit-key.js';

/**
 * Where failed sign-ins are counted (LOGIN_RATE_LIMIT attempts per window, per bucket). The
 * service keeps the counts in the supervisor (over IPC), so restarting the API worker does not
 * reset them; tests and tools may count locally.
 */
export interface SignInLimiter {
  /** Counts one attempt in `bucket`, or refuses it. Counted before the password is checked. */
  attempt(bucket: string): Promise<RateLimitDecision>;
  /** A correct sign-in clears its bucket. */
  succeeded(bucket: string): void;
}

/**
 * The bucket of one attempt. A browser with a valid device cookie is counted on its own (see
 * device-cookie.ts): nobody else can fill its bucket. Anything else is counted per client
 * address (an IPv6 /64 as one) and user name, so guesses at one user do not lock out another,
 * nor the same user from another address. Bounded length whatever the input.
 */
export function signInBucket(address: string, user: string, deviceId: string | null): string {
  if (deviceId !== null) return `device:${deviceId}`;
  const userDigest = createHash('sha256').update(user, 'utf8').digest('hex').slice(0, 16);
  return `address:${rateLimitKey(address)}|user:${userDigest}`;
}

export class LocalSignInLimiter implements SignInLimiter {
  private readonly limiter: LoginRateLimiter;

  constructor(
    limit: RateLimit,
    maxTracked: number = MAX_TRACKED_LOGIN_ADDRESSES,
    private readonly now: () => number = Date.now,
  ) {
    this.limiter = new LoginRateLimiter(limit, maxTracked);
  }

  get trackedBuckets(): number {
    return this.limiter.trackedAddresses;
  }

  attempt(bucket: string): Promise<RateLimitDecision> {
    return Promise.resolve(this.limiter.attempt(bucket, this.now()));
  }

  succeeded(bucket: string): void {
    this.limiter.succeeded(bucket);
  }
}
