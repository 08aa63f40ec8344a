/**
 * The message of anything thrown, for logs and refusals: an Error's message, a string as it
 * is, anything else as String() gives it. `catch (e)` binds `unknown`; reading `(e as Error)
 * .message` would print "undefined" for a thrown string or object.
 */
export function errorMessage(e: unknown): string {
  if (e instanceof Error) return e.message;
  if (typeof e === 'string') return e;
  try {
    return String(e);
  } catch {
    return 'an unprintable value was thrown';
  }
}
