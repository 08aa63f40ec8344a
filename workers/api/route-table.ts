import type { Request } from 'express';
import { MAX_POOL_SIZE } from '../../shared/config/index.js';
import type { FailureReporter, InstanceAction, WorkerEndpoint } from '../../shared/ipc/protocol.js';
import { readFailureReport } from '../../shared/health/failure-kind.js';
import { IP_SESSION_PREFIX, isAddressSessionKey } from '../../shared/api/session-key.js';
import { hasScope } from '../../shared/auth/principal.js';
import type { Access, Principal } from './access.js';
import { HttpError, badRequest } from './http-error.js';
import { answeredWhereTheSessionLives } from './session-forwarding.js';
import { auditTypesQuery, booleanQuery, exitFingerprint, instanceId, integerQuery, sessionKey } from './query-values.js';

/** Audit ring bounds, mirrored from the supervisor's constants (asserted equal in a test). */
export const EVENTS_DEFAULT_LIMIT = 100;
export const EVENTS_MAX_LIMIT = 1000;

export interface RouteContext {
  req: Request;
  principal: Principal;
  ipc: WorkerEndpoint;
  clientIp: string;
}

export interface Reply {
  status: number;
  json?: unknown;
  headers?: Record<string, string>;
}

export interface ApiRoute {
  method: 'GET' | 'POST' | 'DELETE';
  /** Express path syntax (`:id`). */
  path: string;
  access: Access;
  summary: string;
  handler(ctx: RouteContext): Promise<Reply> | Reply;
}

/** The 404 of an unknown session; also what a proxy token gets for another client's address session. */
const NO_SUCH_SESSION = 'no such session';

/**
 * The session key of a /api/sessions/{key} route, as the caller may address it. A proxy token
 * may name any key (keys are not tenancy) except the address sessions DEFAULT_SESSION=ip makes
 * (`ip:<client address>`): it may address only its own. Any other answers exactly what an
 * unknown key answers, so a proxy token can neither learn which addresses use the pool nor
 * rotate, report on or delete another client's session. Admin credentials address every key.
 */
function addressableSessionKey(ctx: RouteContext): string {
  const key = sessionKey(ctx.req.params.key);
  if (isAddressSessionKey(key) && !hasScope(ctx.principal, 'admin') && key !== IP_SESSION_PREFIX + ctx.clientIp) {
    throw new HttpError(404, NO_SUCH_SESSION);
  }
  return key;
}

/** The credential a failure report is counted against (CLIENT_REPORT_BUDGET). */
function reporterOf(ctx: RouteContext): FailureReporter {
  const p = ctx.principal;
  switch (p.kind) {
    case 'token':
      return { kind: 'token', id: p.id };
    case 'session':
    case 'ticket':
      return { kind: 'sign-in', user: p.user };
    case 'anonymous-auth-disabled':
      return { kind: 'address', ip: ctx.clientIp };
  }
}

function ok(json: unknown, status = 200): Reply {
  return { status, json };
}

function instanceAction(action: InstanceAction): ApiRoute['handler'] {
  return async ({ req, ipc }) => {
    const id = instanceId(req.params.id);
    const wipe = action === 'restart' ? booleanQuery('wipe', req.query.wipe, true) : undefined;
    return ok(await ipc.request('instances.action', { id, action, ...(wipe === undefined ? {} : { wipe }) }));
  };
}

function resizeSize(body: unknown): number {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw badRequest('body must be a JSON object {"size": N}');
  const size = (body as { size?: unknown }).size;
  if (typeof size !== 'number' || !Number.isInteger(size)) throw badRequest('size must be an integer');
  if (size < 1 || size > MAX_POOL_SIZE) throw badRequest(`size must be from 1 to ${MAX_POOL_SIZE}`);
  return size;
}

/**
 * Every /api/ route of the pool, instances, sessions, events and statistics, with its
 * access. Authentication routes are added by auth-routes.ts; the stream by the SSE hub.
 */
export const POOL_ROUTES: readonly ApiRoute[] = [
  {
    method: 'GET', path: '/api/pool', access: 'admin', summary: 'pool summary',
    handler: async ({ ipc }) => ok(await ipc.request('pool.summary', null)),
  },
  {
    method: 'POST', path: '/api/pool/resize', access: 'admin', summary: 'resize the pool (returns at once)',
    handler: async ({ req, ipc }) => ok(await ipc.request('pool.resize', { size: resizeSize(req.body) }), 202),
  },
  {
    method: 'POST', path: '/api/pool/rotate', access: 'admin', summary: 'sweep a new circuit over every instance',
    handler: async ({ ipc }) => ok(await ipc.request('pool.rotate', null)),
  },
  {
    method: 'GET', path: '/api/exits', access: 'admin', summary: 'exit catalog, assignments and bans',
    handler: async ({ ipc }) => ok(await ipc.request('exits.list', null)),
  },
  {
    method: 'GET', path: '/api/fleet', access: 'admin', summary: 'every node of the fleet with its instances',
    handler: async ({ ipc }) => ok(await ipc.request('fleet.view', null)),
  },
  {
    method: 'DELETE', path: '/api/exits/:fingerprint/ban', access: 'admin', summary: 'lift an exit ban',
    handler: async ({ req, ipc }) => {
      await ipc.request('exits.unban', { fingerprint: exitFingerprint(req.params.fingerprint) });
      return { status: 204 };
    },
  },
  {
    method: 'GET', path: '/api/instances', access: 'admin', summary: 'list instances',
    handler: async ({ ipc }) => ok(await ipc.request('instances.list', null)),
  },
  {
    method: 'GET', path: '/api/instances/:id', access: 'admin', summary: 'one instance',
    handler: async ({ req, ipc }) => ok(await ipc.request('instances.get', { id: instanceId(req.params.id) })),
  },
  { method: 'POST', path: '/api/instances/:id/rotate', access: 'admin', summary: 'new circuit', handler: instanceAction('rotate') },
  { method: 'POST', path: '/api/instances/:id/restart', access: 'admin', summary: 'restart (wipe query)', handler: instanceAction('restart') },
  { method: 'POST', path: '/api/instances/:id/quarantine', access: 'admin', summary: 'quarantine', handler: instanceAction('quarantine') },
  { method: 'POST', path: '/api/instances/:id/release', access: 'admin', summary: 'release', handler: instanceAction('release') },
  { method: 'POST', path: '/api/instances/:id/drain', access: 'admin', summary: 'move sessions off', handler: instanceAction('drain') },
  {
    method: 'GET', path: '/api/sessions', access: 'admin', summary: 'list sessions',
    handler: async ({ ipc }) => ok(await ipc.request('sessions.list', null)),
  },
  {
    method: 'GET', path: '/api/sessions/:key', access: 'proxy', summary: 'one session',
    handler: async (ctx) => {
      const key = addressableSessionKey(ctx);
      return answeredWhereTheSessionLives(ctx.req, ctx.ipc, key, async () => ok(await ctx.ipc.request('sessions.get', { key })));
    },
  },
  {
    method: 'POST', path: '/api/sessions/:key/rotate', access: 'proxy', summary: 'move the session to another exit',
    handler: async (ctx) => {
      const key = addressableSessionKey(ctx);
      const newnym = booleanQuery('newnym', ctx.req.query.newnym, false);
      return answeredWhereTheSessionLives(ctx.req, ctx.ipc, key, async () => ok(await ctx.ipc.request('sessions.rotate', { key, newnym })));
    },
  },
  {
    method: 'POST', path: '/api/sessions/:key/failure', access: 'proxy', summary: 'report a failure seen through the session',
    handler: async (ctx) => {
      const key = addressableSessionKey(ctx);
      // Typed here: a body of the wrong JSON type is refused before it reaches the supervisor.
      const report = readFailureReport(ctx.req.body ?? null);
      return answeredWhereTheSessionLives(ctx.req, ctx.ipc, key, async () => ok(await ctx.ipc.request('sessions.failure', { key, report, reporter: reporterOf(ctx) })));
    },
  },
  {
    method: 'GET', path: '/api/sessions/:key/refusal', access: 'proxy', summary: "the session's last route refusal",
    // Answered by this node: a refused session has no owner, and the proxy that refused it asked this node's supervisor.
    handler: async (ctx) => ok(await ctx.ipc.request('sessions.refusal', { key: addressableSessionKey(ctx) })),
  },
  {
    method: 'DELETE', path: '/api/sessions/:key', access: 'proxy', summary: 'unpin the session',
    handler: async (ctx) => {
      const key = addressableSessionKey(ctx);
      return answeredWhereTheSessionLives(ctx.req, ctx.ipc, key, async () => {
        await ctx.ipc.request('sessions.delete', { key });
        return { status: 204 };
      });
    },
  },
  {
    method: 'GET', path: '/api/events', access: 'admin', summary: 'audit log, newest first',
    handler: async ({ req, ipc }) => {
      const limit = integerQuery('limit', req.query.limit, EVENTS_DEFAULT_LIMIT, 1, EVENTS_MAX_LIMIT);
      const types = auditTypesQuery(req.query.type);
      return ok(await ipc.request('events.recent', types === null ? { limit } : { limit, types }));
    },
  },
  {
    method: 'GET', path: '/api/stats/history', access: 'admin', summary: 'statistics time series',
    handler: async ({ req, ipc }) => {
      const r = req.query.range;
      if (r !== undefined && r !== 'long' && r !== 'fine') throw badRequest('range must be long or fine');
      return ok(await ipc.request('stats.history', { range: r === 'long' ? 'long' : 'fine' }));
    },
  },
];
