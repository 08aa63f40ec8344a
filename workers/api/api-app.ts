import express, { type NextFunction, type Request, type Response } from 'express';
import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from '../../shared/logger.js';
import { IpcPeerGoneError, IpcTimeoutError } from '../../shared/ipc/errors.js';
import type { WorkerEndpoint } from '../../shared/ipc/protocol.js';
import type { ApiAuthenticator } from './auth/api-authenticator.js';
import { allows, authenticate, type Access, type Principal } from './access.js';
import { httpErrorOfCatalogued } from './error-status.js';
import { HttpError, forbidden, notFound } from './http-error.js';
import type { ApiRoute, Reply } from './route-table.js';
import { requestOriginGuard, type RequestOriginPolicy } from './request-origin.js';
import { securityHeaders } from './security-headers.js';
import { SseHub, type StreamCredential } from './sse-hub.js';
import { clientIpOf } from '../../shared/net/client-ip.js';
import { errorMessage } from '../../shared/errors/error-message.js';

/** Largest JSON body the API reads; anything bigger is a 400 before it is parsed. */
export const MAX_JSON_BODY_BYTES = 16 * 1024;

export interface ApiAppOptions {
  routes: readonly ApiRoute[];
  /** Read per request: the supervisor may push a new credential snapshot at any time. */
  authenticator(): ApiAuthenticator;
  ipc: WorkerEndpoint;
  hub: SseHub;
  /** Frames sent to a new stream subscriber before live ones (the latest state). */
  initialStreamFrames(): string[];
  dashboardDir: string | null;
  /** Host and cross-site checks applied to every request (request-origin.ts). */
  origin: RequestOriginPolicy;
  log: Logger;
}

/** As the proxies see it (IPv4-mapped addresses unwrapped), so `ip:` session keys compare equal. */
function clientIp(req: Request): string {
  return clientIpOf(req.socket.remoteAddress);
}

function send(res: Response, reply: Reply): void {
  for (const [k, v] of Object.entries(reply.headers ?? {})) res.setHeader(k, v);
  res.status(reply.status);
  if (reply.json === undefined) res.end();
  else res.json(reply.json);
}

/**
 * Authenticates per the route's access, then checks its scope. 401 (with a challenge)
 * for a missing or bad credential, 403 (no challenge) for too little scope.
 */
function guard(access: Access, auth: () => ApiAuthenticator): (req: Request, res: Response, next: NextFunction) => void {
  return (req, res, next) => {
    if (access === 'public') return next();
    const principal = authenticate(auth(), req.headers.authorization, req.query.ticket, access === 'stream');
    if (!allows(access, principal)) throw forbidden();
    res.locals.principal = principal;
    next();
  };
}

export function createApiApp(o: ApiAppOptions): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.use(securityHeaders);
  app.use(requestOriginGuard(o.origin));
  // Parsed after the guard, so a request without a valid credential gets its 401 (or 403)
  // whatever its body, and nobody unauthenticated makes the worker read and parse JSON.
  const jsonBody = express.json({ limit: MAX_JSON_BODY_BYTES, strict: false, type: ['application/json', 'application/*+json'] });

  for (const route of o.routes) {
    const method = route.method.toLowerCase() as 'get' | 'post' | 'delete';
    app[method](route.path, guard(route.access, o.authenticator), jsonBody, async (req: Request, res: Response) => {
      const reply = await route.handler({ req, principal: res.locals.principal as Principal, ipc: o.ipc, clientIp: clientIp(req) });
      send(res, reply);
    });
  }

  app.get('/api/stream', guard('stream', o.authenticator), (_req, res) => {
    o.hub.subscribe(res, o.initialStreamFrames(), streamCredentialOf(res.locals.principal as Principal));
  });

  // Unmatched /api/ paths (and /api itself): authenticated first, then 404; never the dashboard.
  app.all(['/api', '/api/{*rest}'], guard('proxy', o.authenticator), () => {
    throw notFound('no such API route');
  });

  app.get('/health', async (_req, res) => {
    try {
      const h = await o.ipc.request('health.get', null, 1000);
      if (h.proxyWorkersListening === 0) {
        res.status(503).type('text/plain').send('unavailable: the proxy listeners are not up (no proxy worker is running)\n');
        return;
      }
      const up = h.routable > 0;
      res.status(up ? 200 : 503).type('text/plain').send(up ? `ok: ${h.routable} routable\n` : 'unavailable: no routable instance\n');
    } catch {
      res.status(503).type('text/plain').send('unavailable: supervisor not answering\n');
    }
  });

  app.get('/metrics', async (_req, res) => {
    const m = await o.ipc.request('metrics.text', null, 5000);
    res.status(200).type(m.contentType).send(m.text);
  });

  mountDashboard(app, o.dashboardDir);
  // Anything else (other methods, or every path while the dashboard is not built): plain text.
  app.use(() => {
    throw notFound();
  });

  app.use((err: unknown, _req: Request, res: Response, _next: NextFunction) => {
    if (res.headersSent) {
      res.destroy();
      return;
    }
    const e = toHttpError(err);
    if (e.status >= 500) o.log.error('API request failed', { error: errorMessage(err) });
    for (const [k, v] of Object.entries(e.headers)) res.setHeader(k, v);
    res.status(e.status).type('text/plain').send(`${e.message}\n`);
  });
  return app;
}

/** What ends a stream: its token's revocation, or the expiry of the sign-in behind it. */
function streamCredentialOf(p: Principal): StreamCredential {
  switch (p.kind) {
    case 'token':
      return { tokenId: p.id };
    case 'session':
      return p.expires === undefined ? {} : { expiresAt: p.expires * 1000 };
    case 'ticket':
      return p.sessionExpires === undefined ? {} : { expiresAt: p.sessionExpires * 1000 };
    case 'anonymous-auth-disabled':
      return {};
  }
}

function toHttpError(err: unknown): HttpError {
  if (err instanceof HttpError) return err;
  const catalogued = httpErrorOfCatalogued(err);
  if (catalogued) return catalogued;
  const t = (err as { type?: unknown; status?: unknown })?.type;
  if (t === 'entity.parse.failed') return new HttpError(400, 'malformed JSON body');
  if (t === 'entity.too.large') return new HttpError(400, `body larger than ${MAX_JSON_BODY_BYTES} bytes`);
  if (typeof t === 'string' && t.startsWith('encoding.')) return new HttpError(400, 'unsupported body encoding');
  if (t === 'charset.unsupported') return new HttpError(400, 'unsupported body charset');
  // Express answers a path parameter that is not valid percent-encoding with a URIError.
  if (err instanceof URIError) return new HttpError(400, 'malformed percent-encoding in the path');
  // Other client errors from express's own parts: a missing static asset keeps its 404; the
  // rest (a gzip body that does not inflate, ...) is bad input.
  const status = (err as { status?: unknown })?.status;
  if (status === 404) return notFound();
  if (typeof status === 'number' && status >= 400 && status < 500) return new HttpError(400, 'bad request');
  if (err instanceof IpcTimeoutError || err instanceof IpcPeerGoneError) return new HttpError(503, 'supervisor not answering');
  return new HttpError(500, 'internal error');
}

/**
 * The tsc build compiles the dashboard's sources (for its unit tests) into the same directory
 * as Vite's bundle, with source maps: neither is part of the page, and serving them would
 * publish the code layout and comments. These are never served.
 */
export function isUnservedDashboardPath(urlPath: string): boolean {
  let p: string;
  try {
    // As the static handler will read it.
    p = decodeURIComponent(urlPath).toLowerCase();
  } catch {
    return true;
  }
  return p === '/src' || p.startsWith('/src/') || p.endsWith('.map') || p.endsWith('.ts') || p.endsWith('.tsx');
}

/** Hashed assets are immutable; index.html is revalidated, so a new build shows at once. */
function mountDashboard(app: express.Express, dir: string | null): void {
  const index = dir ? path.join(dir, 'index.html') : null;
  if (!dir || !index || !fs.existsSync(index)) {
    app.get('/', (_req, res) => {
      res.status(503).type('text/plain').send('dashboard not built: run npm run build\n');
    });
    return;
  }
  app.use((req, _res, next) => next(isUnservedDashboardPath(req.path) ? notFound() : undefined));
  app.use(
    '/assets',
    express.static(path.join(dir, 'assets'), { immutable: true, maxAge: '365d', index: false, fallthrough: false }),
  );
  app.use(express.static(dir, { index: false, maxAge: 0, setHeaders: (res) => res.setHeader('Cache-Control', 'no-cache') }));
  app.get('/{*rest}', (_req, res) => {
    res.setHeader('Cache-Control', 'no-cache');
    res.sendFile(index);
  });
}
