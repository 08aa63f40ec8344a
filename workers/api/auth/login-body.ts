import { AuthBadRequestError } from '../../../shared/auth/errors.js';

/** ADMIN_USER allows 128 characters, so a longer user can never sign in. */
export const MAX_LOGIN_USER_LENGTH = 128;
/** ADMIN_PASSWORD allows 1024 characters; the bound also caps the work of one attempt. */
export const MAX_LOGIN_PASSWORD_LENGTH = 1024;

export interface LoginRequest {
  user: string;
  password: string;
}

/** The body of POST /api/auth/login. Throws AuthBadRequestError (400) for anything else. */
export function parseLoginBody(body: unknown): LoginRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new AuthBadRequestError('body must be a JSON object {user, password}');
  }
  const { user, password } = body as Record<string, unknown>;
  if (typeof user !== 'string' || user.length === 0) throw new AuthBadRequestError('user must be a non-empty string');
  if (typeof password !== 'string' || password.length === 0) {
    throw new AuthBadRequestError('password must be a non-empty string');
  }
  if (user.length > MAX_LOGIN_USER_LENGTH) {
    throw new AuthBadRequestError(`user must be at most ${MAX_LOGIN_USER_LENGTH} characters`);
  }
  if (password.length > MAX_LOGIN_PASSWORD_LENGTH) {
    throw new AuthBadRequestError(`password must be at most ${MAX_LOGIN_PASSWORD_LENGTH} characters`);
  }
  return { user, password };
}
