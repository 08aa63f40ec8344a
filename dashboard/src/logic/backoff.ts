/**
 * Reconnect delays for the live stream. Exponential so a service that is down is not
 * hammered by every open tab, jittered so tabs that lost it together do not return in step.
 */
export interface BackoffPolicy {
  baseMs: number;
  maxMs: number;
}

export const STREAM_BACKOFF: BackoffPolicy = { baseMs: 1_000, maxMs: 30_000 };

/**
 * Delay before retry number `failures` (0 = the first retry after a loss).
 * `random` is in [0, 1); the result lies in [cap/2, cap] where cap = min(max, base·2^failures)
 * ("equal jitter": never shorter than half the nominal delay).
 */
export function reconnectDelayMs(failures: number, random: number, policy: BackoffPolicy = STREAM_BACKOFF): number {
  const n = Math.max(0, Math.min(30, Math.floor(failures)));
  const cap = Math.min(policy.maxMs, policy.baseMs * 2 ** n);
  const r = Math.min(Math.max(random, 0), 1);
  return Math.round(cap / 2 + (cap / 2) * r);
}

/**
 * A connection that stayed up this long counts as healthy: the next loss starts the backoff
 * from the beginning again. Shorter-lived ones keep climbing, so a stream that the server
 * accepts and drops at once does not reconnect in a tight loop.
 */
export const STABLE_CONNECTION_MS = 10_000;

/**
 * After the stream was lost (or could not be opened): how long to wait, and the failure count
 * to carry to the next loss. `connectedForMs` is null when the connection never opened.
 */
export function afterLoss(
  failures: number,
  connectedForMs: number | null,
  random: number,
  policy: BackoffPolicy = STREAM_BACKOFF,
): { delayMs: number; failures: number } {
  const streak = connectedForMs !== null && connectedForMs >= STABLE_CONNECTION_MS ? 0 : failures;
  return { delayMs: reconnectDelayMs(streak, random, policy), failures: streak + 1 };
}
