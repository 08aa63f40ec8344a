/**
 * How the dashboard treats a failed API call (docs/api.md, "Errors"): a 401 means the credential is
 * no good any more and signs out; a 403 is "not allowed" and keeps the user signed in.
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

/** 401: missing, malformed or expired credential. The client signs out. */
export class UnauthorizedError extends ApiError {
  constructor(message: string) {
    super(401, message);
    this.name = 'UnauthorizedError';
  }
}

/** 403: the credential lacks the scope. Shown as "not allowed"; never signs out. */
export class ForbiddenError extends ApiError {
  constructor(message: string) {
    super(403, message);
    this.name = 'ForbiddenError';
  }
}

/** The network failed (no HTTP answer at all). */
export class NetworkError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'NetworkError';
  }
}

/** The typed error for a non-2xx answer; `body` is the plain-text error message. */
export function errorForStatus(status: number, body: string): ApiError {
  const text = body.trim();
  if (status === 401) return new UnauthorizedError(text || 'signed out');
  if (status === 403) return new ForbiddenError(text ? `not allowed: ${text}` : 'not allowed');
  if (status === 429) return new ApiError(429, text || 'too many requests');
  return new ApiError(status, text ? `${status}: ${text}` : `HTTP ${status}`);
}

/** One line for an error shown to the user. */
export function describeError(e: unknown): string {
  if (e instanceof ForbiddenError) return e.message.startsWith('not allowed') ? e.message : `not allowed: ${e.message}`;
  if (e instanceof Error) return e.message;
  return String(e);
}
