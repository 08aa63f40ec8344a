import type { ApiAuthenticator } from './auth/api-authenticator.js';
import { wwwAuthenticate } from './auth/api-authenticator.js';
import { hasScope, type Principal } from '../../shared/auth/principal.js';
import { HttpError } from './http-error.js';

export type { Principal };

/**
 * Who may call a route. `public`: anyone. `proxy`: a proxy or admin token, or a sign-in
 * credential. `admin`: an admin token or a sign-in credential. `stream`: like admin, or a
 * ticket in the query. A ticket is refused on every route but the stream.
 */
export type Access = 'public' | 'proxy' | 'admin' | 'stream';

export function allows(access: Access, p: Principal): boolean {
  switch (access) {
    case 'public':
      return true;
    case 'stream':
      return p.kind === 'ticket' || hasScope(p, 'admin');
    case 'proxy':
      return hasScope(p, 'proxy');
    case 'admin':
      return hasScope(p, 'admin');
  }
}

/**
 * Verifies the request's credential with the API worker's current authenticator; a missing,
 * malformed or expired one is a 401 that always carries WWW-Authenticate. Under
 * AUTH_DISABLED the same path answers the auth-disabled principal.
 */
export function authenticate(auth: ApiAuthenticator, authorization: unknown, ticket: unknown, allowTicket: boolean): Principal {
  const outcome = auth.authenticate({ authorization, ticket, allowTicket });
  if (outcome.ok) return outcome.principal;
  throw new HttpError(401, outcome.reason === 'missing' ? 'missing credential' : `${outcome.reason} credential`, {
    'WWW-Authenticate': wwwAuthenticate(outcome.reason),
  });
}
