/**
 * Who may call a route. `public`: anyone. `proxy`: a proxy or admin token, or a sign-in
 * credential. `admin`: an admin token or a sign-in credential. `stream`: like admin, or a
 * ticket in the query. A ticket is refused on every route but the stream.
 */
export type Access = 'public' | 'proxy' | 'admin' | 'stream';

/** The authenticated caller of a request. */
export type Principal =
  | { kind: 'token'; id: string; scope: 'proxy' | 'admin' }
  | { kind: 'session'; user: string }
  | { kind: 'ticket'; user: string }
  | { kind: 'auth-disabled' };

export function allows(access: Access, p: Principal): boolean {
  if (access === 'public' || p.kind === 'auth-disabled' || p.kind === 'session') return true;
  if (p.kind === 'ticket') return access === 'stream';
  if (access === 'proxy') return true;
  return p.scope === 'admin';
}

/** Turns request credentials into a principal; a failure is an HttpError 401. */
export interface Authenticator {
  readonly required: boolean;
  /** `ticket` is the stream's query credential, passed only for stream routes. */
  authenticate(authorization: string | undefined, ticket: string | undefined): Principal;
}
