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

/**
 * Checks a token's owner: the party the operator issues it to (a customer, a team). Tokens of
 * different owners are independent reporters (supervisor/verdicts: two of them can ban an exit
 * for everyone); tokens without one are the operator's own. The same rules as a name.
 */
export function validateTokenOwner(owner: unknown): string {
  if (typeof owner !== 'string') throw new AuthBadRequestError('owner must be a string');
  if (owner === '') return '';
  try {
    return validateTokenName(owner);
  } catch (e) {
    if (e instanceof AuthBadRequestError) throw new AuthBadRequestError(e.message.replace(/^name/, 'owner'));
    throw e;
  }
}

export interface TokenCreateRequest {
  name: string;
  scope: Scope;
  /** '' or absent: the operator's own token. */
  owner?: string;
}

/** The body of POST /api/tokens: {name: string, scope: 'proxy' | 'admin', owner?: string}. */
export function parseTokenCreateBody(body: unknown): TokenCreateRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new AuthBadRequestError('body must be a JSON object {name, scope, owner?}');
  }
  const { name, scope, owner } = body as Record<string, unknown>;
  const validName = validateTokenName(name);
  if (!isScope(scope)) throw new AuthBadRequestError("scope must be 'proxy' or 'admin'");
  const validOwner = owner === undefined ? '' : validateTokenOwner(owner);
  return { name: validName, scope, ...(validOwner === '' ? {} : { owner: validOwner }) };
}
