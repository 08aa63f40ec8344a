/**
 * The tests' one way to wait: poll against a deadline that names what it waited for. Slow,
 * shared machines make fixed sleeps flaky, so no test sleeps for a condition.
 */

export class PollTimeoutError extends Error {
  constructor(what: string, timeoutMs: number, last: unknown) {
    super(`${what}: not within ${timeoutMs} ms (last seen: ${JSON.stringify(last)})`);
    this.name = 'PollTimeoutError';
  }
}

export interface PollOptions<T> {
  /** Between probes; default 200 ms. */
  intervalMs?: number;
  /** When the probed value is the one waited for; default: any value but undefined. */
  until?: (value: T) => boolean;
}

/**
 * Calls `probe` until its value is the one waited for (`until`, else anything but undefined) and
 * returns it. A probe that throws counts as "not yet" (the service may be restarting); the
 * timeout error names the last value or error seen. `options` as a number is the interval.
 */
export async function pollUntil<T>(
  what: string,
  probe: () => Promise<T | undefined> | T | undefined,
  timeoutMs: number,
  options: number | PollOptions<T> = {},
): Promise<T> {
  const { intervalMs = 200, until = (v: T) => v !== undefined } = typeof options === 'number' ? { intervalMs: options } : options;
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined && until(value)) return value;
      last = value === undefined ? 'undefined' : value;
    } catch (e) {
      last = (e as Error).message;
    }
    if (Date.now() > deadline) throw new PollTimeoutError(what, timeoutMs, last);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** Until a synchronous condition on in-process state holds (fakes, counters): polled every 10 ms. */
export async function waitFor(what: string, condition: () => boolean, timeoutMs = 5000): Promise<void> {
  await pollUntil(what, () => (condition() ? true : undefined), timeoutMs, 10);
}
