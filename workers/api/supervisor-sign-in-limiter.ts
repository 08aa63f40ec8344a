import type { RateLimitDecision } from '../../shared/auth/login-rate-limiter.js';
import type { SignInLimiter } from '../../shared/auth/sign-in-limit.js';
import type { WorkerEndpoint } from '../../shared/ipc/protocol.js';

/** How long a sign-in waits for the supervisor's count; past it the sign-in fails with 503. */
const SIGN_IN_COUNT_TIMEOUT_MS = 2000;

/**
 * Failed sign-ins counted in the supervisor, which outlives this worker: killing or crashing the
 * API worker (or waiting for it to be re-forked) does not give a password guesser a fresh budget.
 */
export class SupervisorSignInLimiter implements SignInLimiter {
  constructor(private readonly endpoint: WorkerEndpoint) {}

  attempt(bucket: string): Promise<RateLimitDecision> {
    return this.endpoint.request('signin.attempt', { bucket }, SIGN_IN_COUNT_TIMEOUT_MS);
  }

  succeeded(bucket: string): void {
    this.endpoint.notify('signin.succeeded', { bucket });
  }
}
