import { ACCOUNTING_FLUSH_MS, FLEET_NODE_ENV } from '../../shared/ipc/protocol.js';
import { COUNTRY_EXIT_WAIT_MS } from '../../shared/config/limits.js';
import { ThrottledWarning } from '../../shared/logging/throttled-warning.js';
import { ConnectionBudget } from '../proxy/connection-budget.js';
import { credentialRefusalLog } from '../proxy/credential-refusal-log.js';
import { HttpProxyServer } from '../proxy/http-proxy-server.js';
import { probeDestination } from '../proxy/destination-probe.js';
import { fetchThroughInstance } from '../proxy/egress-probe.js';
import { InstanceDownSignal } from '../proxy/instance-down.js';
import { Socks5ProxyServer, createSessionPortServer } from '../proxy/socks5-server.js';
import { AccountingBatch } from './accounting-batch.js';
import { LeasedRouter } from './leased-router.js';
import { listenNamed } from '../../shared/worker/listen-error.js';
import { HopCredentials } from './hop-credentials.js';
import { ProxyCredentials } from './proxy-credentials.js';
import { warmUpProxyPath } from './warm-up.js';
import type { RunningWorker, WorkerContext } from '../../shared/worker/worker-context.js';
import { errorMessage } from '../../shared/errors/error-message.js';

/** A route request the supervisor does not answer within this is refused (never a hang). */
export const ROUTE_TIMEOUT_MS = 2000;
/** Route round-trip samples kept per accounting batch (for the IPC histogram). */
const MAX_RTT_SAMPLES_PER_BATCH = 512;

/**
 * The proxy worker: the SOCKS5 and HTTP listeners (shared with the other proxy workers
 * through node:cluster), session ports when configured, routing over IPC with route leases, and
 * batched accounting back to the supervisor (connections routed with a lease at once, the rest
 * every ACCOUNTING_FLUSH_MS).
 */
export async function startProxyWorker(ctx: WorkerContext): Promise<RunningWorker> {
  const { config, endpoint, log } = ctx;
  const credentials = new ProxyCredentials(config.authDisabled, endpoint);
  credentials.install(await endpoint.request('credentials.proxy', null));
  // On a node of a fleet: the keys hop credentials are checked with (the hop listener below).
  const hopKeys = process.env[FLEET_NODE_ENV] === undefined ? null : await endpoint.request('hop.keys', null);
  const hopCredentials = hopKeys === null ? null : new HopCredentials(hopKeys, credentials, config.usernameParams, endpoint);
  const batch = new AccountingBatch(MAX_RTT_SAMPLES_PER_BATCH);

  const badUsernames = new ThrottledWarning(log, 'proxy usernames refused for their session parameters');
  // Connections routed with a lease travel with the batch; the supervisor asks for the batch
  // (accounting.flush) before it reads or decides on sessions, so what it answers is exact.
  const router = new LeasedRouter({
    // A country no instance serves yet waits while one is given an exit there (COUNTRY_EXIT_WAIT_MS).
    ask: (params) => endpoint.request('route', params, params.params?.countries ? COUNTRY_EXIT_WAIT_MS + ROUTE_TIMEOUT_MS : ROUTE_TIMEOUT_MS),
    defaultSession: config.defaultSession,
    usernameParams: config.usernameParams,
    sessionTtlMaxMs: config.sessionTtlMaxMs,
    onBadUsername: (detail, listener) => badUsernames.note({ listener, detail }),
    onRoundTrip: (ms) => batch.noteRoundTrip(ms),
    log,
  });
  endpoint.handle('routes.invalidate', (invalidation) => ({ dropped: router.invalidate(invalidation) }));
  endpoint.handle('accounting.flush', () => {
    flush();
    return null;
  });
  endpoint.handle('destination.probe', (probe) => probeDestination(probe));
  endpoint.handle('egress.fetch', (fetch) => fetchThroughInstance(fetch));

  const events = batch.events;

  const budget = new ConnectionBudget(config.maxConnectionsPerWorker, log, undefined, config.maxUnauthenticatedPerWorker);
  const credentialRefusals = credentialRefusalLog(log);
  let reportedConnections = -1;
  function flush(): void {
    const opened = router.takeOpened();
    const refused = budget.takeRefusedCount();
    const evicted = budget.takeEvictedCount();
    const connections = budget.inUse;
    const nothingNew = opened.length === 0 && batch.isEmpty && refused === 0 && evicted === 0;
    if (nothingNew && connections === reportedConnections) return;
    reportedConnections = connections;
    endpoint.notify('accounting', { opened, ...batch.take(), refused, evicted, connections });
  }
  const flushTimer = setInterval(flush, ACCOUNTING_FLUSH_MS);

  const instanceDown = new InstanceDownSignal();
  endpoint.onNotice('instance-down', ({ instance }) => {
    // Before the dials waiting on it re-route: they must not find a lease to the same instance.
    router.invalidate({ keys: [], instances: [instance] });
    instanceDown.markDown(instance);
  });
  const deps = { router, events, credentials: credentials.policy(), log, budget, instanceDown, credentialRefusals, exitHeader: config.exitHeader };
  const socks = new Socks5ProxyServer(deps);
  const http = new HttpProxyServer(deps);
  // Before listening: the first clients find the hot path compiled (warm-up.ts).
  const warm = await warmUpProxyPath(config.proxyWarmUp, log);
  log.debug('proxy path warmed up', { connections: warm.completed, ms: Math.round(warm.ms) });
  await listenNamed('SOCKS_PORT', config.socksPort, config.bindHost, () => socks.listen(config.socksPort, config.bindHost));
  await listenNamed('HTTP_PORT', config.httpPort, config.bindHost, () => http.listen(config.httpPort, config.bindHost));
  // The fleet's internal listener: hop credentials only, never a proxy token (and the two above never take a hop credential).
  const hop = hopCredentials === null ? null : new Socks5ProxyServer({ ...deps, kind: 'hop', credentials: hopCredentials.policy() });
  if (hop) await listenNamed('HOP_PORT', config.hopPort, config.bindHost, () => hop.listen(config.hopPort, config.bindHost));

  // Session ports: one credential-free listener per instance, opened and closed as the pool changes.
  const sessionPorts = new Map<number, Socks5ProxyServer>();
  const syncSessionPorts = async (instances: number[]): Promise<void> => {
    if (config.sessionPortBase === null) return;
    const wanted = new Set(instances);
    for (const [id, server] of sessionPorts) {
      if (!wanted.has(id)) {
        sessionPorts.delete(id);
        await server.close();
      }
    }
    for (const id of wanted) {
      if (sessionPorts.has(id)) continue;
      const server = createSessionPortServer({ instanceId: id, router, events, log, budget, instanceDown });
      sessionPorts.set(id, server);
      try {
        await server.listen(config.sessionPortBase + id, config.bindHost);
      } catch (e) {
        sessionPorts.delete(id);
        log.error('session port failed to open', { instance: id, port: config.sessionPortBase + id, error: errorMessage(e) });
      }
    }
  };
  endpoint.onNotice('session-ports', ({ instances }) => void syncSessionPorts(instances));

  log.debug('proxy listeners up', { socks: config.socksPort, http: config.httpPort, ...(hop ? { hop: config.hopPort } : {}) });
  return {
    async stop(graceMs: number): Promise<void> {
      // Connections cut at the end of the grace are the shutdown's doing, not the instances'.
      batch.stopping = true;
      await Promise.all([socks.close(graceMs), http.close(graceMs), ...(hop ? [hop.close(graceMs)] : []), ...[...sessionPorts.values()].map((s) => s.close(graceMs))]);
      clearInterval(flushTimer);
      flush();
      credentialRefusals.flush();
      badUsernames.flush();
      budget.flushLog();
    },
  };
}
