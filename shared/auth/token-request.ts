import { AuthBadRequestError } from './errors.js';
import { isScope, type Scope } from './principal.js';

/** Longest token name accepted; names are labels for people, not data. */
export const MAX_TOKEN_NAME_LENGTH = 64;

// Control characters (C0, DEL, C1) and line/paragraph separators would let a name forge log
// lines or break a table in the dashboard.
const FORBIDDEN_IN_NAME = /[\p{Cc}\u2028\u2029]/u;

/** Returns the name unchanged when acceptable; throws AuthBadRequestError otherwise. */
export function validateTokenName(name: unknown): string {
  if (typeof name !== 'string') throw new AuthBadRequestError('name must be a string');
  if (name.trim() === '') throw new AuthBadRequestError('name must not be empty');
  if ([...name].length > MAX_TOKEN_NAME_LENGTH) {
    throw new AuthBadRequestError(`name must be at most ${MAX_TOKEN_NAME_LENGTH} characters`);
  }
  if (FORBIDDEN_IN_NAME.test(name)) throw new AuthBadRequestError('name must not contain control characters');
  return name;
}

export interface TokenCreateRequest {
  name: string;
  scope: Scope;
}

/** The body of POST /api/tokens: {name: string, scope: 'proxy' | 'admin'}. */
export function parseTokenCreateBody(body: unknown): TokenCreateRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new AuthBadRequestError('body must be a JSON object {name, scope}');
  }
  const { name, scope } = body as Record<string, unknown>;
  const validName = validateTokenName(name);
  if (!isScope(scope)) throw new AuthBadRequestError("scope must be 'proxy' or 'admin'");
  return { name: validName, scope };
}
