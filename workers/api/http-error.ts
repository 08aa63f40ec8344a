/** An error answered as plain text with its status (docs/api.md, "Errors"). */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(message);
    this.name = 'HttpError';
  }
}

export const WWW_AUTHENTICATE = 'Bearer realm="exitpool"';

export function unauthorized(message = 'missing, malformed or expired credential'): HttpError {
  return new HttpError(401, message, { 'WWW-Authenticate': WWW_AUTHENTICATE });
}

export function forbidden(message = 'not allowed: this credential lacks the scope for this route'): HttpError {
  return new HttpError(403, message);
}

export function badRequest(message: string): HttpError {
  return new HttpError(400, message);
}

export function notFound(message = 'not found'): HttpError {
  return new HttpError(404, message);
}
