import type { ApiAuthenticator } from './auth/api-authenticator.js';
import { deviceCookieFrom, deviceSetCookie } from './auth/device-cookie.js';
import { parseTokenCreateBody } from '../../shared/auth/token-request.js';
import type { Logger } from '../../shared/logger.js';
import { ThrottledWarning } from '../../shared/logging/throttled-warning.js';
import { HttpError } from './http-error.js';
import type { ApiRoute } from './route-table.js';

/**
 * The authentication endpoints. Sign-in (bcrypt) and ticket minting run here in the API
 * worker; token changes go to the supervisor, which owns auth.json.
 */
export function authRoutes(auth: () => ApiAuthenticator, log: Logger): ApiRoute[] {
  // Never the password, nor the user name tried (people type passwords into it); failures at a
  // bounded rate, since a guesser decides how many there are.
  const refused = new ThrottledWarning(log, 'sign-in refused: wrong user or password');
  const limited = new ThrottledWarning(log, 'sign-in refused: too many failed attempts (LOGIN_RATE_LIMIT)');
  return [
    {
      method: 'GET', path: '/api/auth/status', access: 'public', summary: 'whether sign-in is required',
      // The same answer for every caller: it reveals nothing about credentials.
      handler: () => ({ status: 200, json: { required: !auth().authDisabled, user: auth().adminUser } }),
    },
    {
      method: 'POST', path: '/api/auth/login', access: 'public', summary: 'sign in for a session credential',
      handler: async ({ req, ipc, clientIp }) => {
        const outcome = await auth().signIn(req.body, clientIp, deviceCookieFrom(req.headers.cookie));
        switch (outcome.kind) {
          case 'signed-in':
            log.info('signed in', { user: outcome.result.user, address: clientIp });
            ipc.notify('signed-in', { user: outcome.result.user, address: clientIp });
            return {
              status: 200,
              json: outcome.result,
              ...(outcome.deviceCookie === null ? {} : { headers: { 'Set-Cookie': deviceSetCookie(outcome.deviceCookie) } }),
            };
          case 'bad-request':
            throw new HttpError(400, outcome.message);
          case 'refused':
            refused.note({ address: clientIp });
            throw new HttpError(401, 'wrong user or password', { 'WWW-Authenticate': 'Bearer realm="exitpool"' });
          case 'rate-limited':
            limited.note({ address: clientIp, retryAfterSeconds: outcome.retryAfterSeconds });
            throw new HttpError(429, 'too many failed sign-ins; try again later', { 'Retry-After': String(outcome.retryAfterSeconds) });
        }
      },
    },
    {
      method: 'POST', path: '/api/auth/ticket', access: 'admin', summary: 'a 60-second credential for the stream',
      // A credential that may not mint one gets TicketNotAllowedError: 403 by the error table.
      handler: ({ principal }) => ({ status: 200, json: auth().mintTicket(principal) }),
    },
    {
      method: 'GET', path: '/api/tokens', access: 'admin', summary: 'list tokens (no secrets)',
      handler: async ({ ipc }) => ({ status: 200, json: await ipc.request('tokens.list', null) }),
    },
    {
      method: 'POST', path: '/api/tokens', access: 'admin', summary: 'issue a token (the secret is shown once)',
      handler: async ({ req, ipc }) => ({ status: 201, json: await ipc.request('tokens.create', { request: parseTokenCreateBody(req.body ?? null) }) }),
    },
    {
      method: 'DELETE', path: '/api/tokens/:id', access: 'admin', summary: 'revoke a token (immediate)',
      handler: async ({ req, ipc }) => {
        await ipc.request('tokens.delete', { id: String(req.params.id) });
        return { status: 204 };
      },
    },
  ];
}
