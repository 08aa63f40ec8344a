export class PollTimeoutError extends Error {
  constructor(what: string, timeoutMs: number, last: unknown) {
    super(`${what}: not within ${timeoutMs} ms (last seen: ${JSON.stringify(last)})`);
    this.name = 'PollTimeoutError';
  }
}

/**
 * Calls `probe` until `done(value)` holds, then returns that value. Slow machines make fixed
 * sleeps flaky, so every end-to-end wait is a poll against a deadline that names what it waited for.
 */
export async function pollUntil<T>(what: string, probe: () => Promise<T>, done: (value: T) => boolean, timeoutMs: number, intervalMs = 250): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: T | undefined;
  for (;;) {
    last = await probe();
    if (done(last)) return last;
    if (Date.now() > deadline) throw new PollTimeoutError(what, timeoutMs, last);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
