import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ApiAuthenticator } from './auth/api-authenticator.js';
import { listenNamed } from '../../shared/worker/listen-error.js';
import type { RunningWorker, WorkerContext } from '../../shared/worker/worker-context.js';
import { createApiApp } from './api-app.js';
import { authRoutes } from './auth-routes.js';
import { POOL_ROUTES } from './route-table.js';
import { credentialUpdateHandler } from './credential-updates.js';
import { SseHub } from './sse-hub.js';
import { SupervisorSignInLimiter } from './supervisor-sign-in-limiter.js';

/** Requests get this long to finish on shutdown before their sockets are closed. */
const API_SHUTDOWN_GRACE_MS = 2000;
/** A client must deliver a whole request head within this (slowloris); Node answers 408 and closes. */
export const API_HEADERS_TIMEOUT_MS = 10_000;
/**
 * How often Node checks the header and request deadlines. Its default (30 s) lets a slow head
 * live up to 40 s whatever headersTimeout says.
 */
const API_DEADLINE_CHECK_MS = 1_000;

/**
 * The API worker: REST, the live stream, /metrics, /health and the dashboard. Answers come
 * from the supervisor over IPC; credentials are checked here from the pushed snapshot.
 */
export async function startApiWorker(ctx: WorkerContext): Promise<RunningWorker> {
  const { config, endpoint, log } = ctx;
  const first = await endpoint.request('credentials.api', null);
  const auth = new ApiAuthenticator(
    first,
    { loginTtlMs: config.loginTtlMs, loginRateLimit: config.loginRateLimit },
    { limiter: new SupervisorSignInLimiter(endpoint) },
  );
  const hub = new SseHub();
  endpoint.handle('credentials.update.api', credentialUpdateHandler(auth, hub));
  let latestState: string | null = null;
  endpoint.onNotice('state', (snapshot) => {
    latestState = SseHub.frame('state', snapshot);
    hub.publish('state', snapshot);
  });
  endpoint.onNotice('event', (event) => hub.publish('event', event));

  const app = createApiApp({
    routes: [...authRoutes(() => auth, log), ...POOL_ROUTES],
    authenticator: () => auth,
    ipc: endpoint,
    hub,
    initialStreamFrames: () => (latestState ? [latestState] : []),
    // dist/workers/api → dist/dashboard (built by Vite next to the compiled server).
    origin: { bindHost: config.bindHost, allowedHosts: config.apiAllowedHosts },
    dashboardDir: path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'dashboard'),
    log,
  });
  const server = http.createServer({ connectionsCheckingInterval: API_DEADLINE_CHECK_MS }, app);
  // Slow or idle clients must not hold sockets forever (slowloris): bounded header and request time.
  server.headersTimeout = API_HEADERS_TIMEOUT_MS;
  server.requestTimeout = 30_000;
  server.keepAliveTimeout = 5_000;
  await listenNamed('API_PORT', config.apiPort, config.bindHost, () =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(config.apiPort, config.bindHost, () => {
        server.off('error', reject);
        resolve();
      });
    }),
  );
  log.debug('API listening', { port: config.apiPort });
  return {
    async stop(): Promise<void> {
      hub.close();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      const force = setTimeout(() => server.closeAllConnections(), API_SHUTDOWN_GRACE_MS);
      await closed;
      clearTimeout(force);
    },
  };
}
