import type { Logger } from '../shared/logger.js';
import type { LocalSignInLimiter } from '../shared/auth/sign-in-limit.js';
import { signedInEvent } from '../shared/auth/auth-audit.js';
import { ExitpoolError } from '../shared/errors/catalogue.js';
import type { IpcHandlers } from '../shared/ipc/endpoint.js';
import { IpcPeerGoneError } from '../shared/ipc/errors.js';
import type { Known } from '../shared/ipc/index.js';
import type { DestinationProbe, DestinationProbeResult, RouteInvalidation, StateSnapshot, SupervisorRequests, WorkerRequests, WorkerRole } from '../shared/ipc/protocol.js';
import type { AuditLog } from './audit/audit-log.js';
import type { AuthOperations } from './auth-operations.js';
import type { AuthStore } from './auth/auth-store.js';
import type { WorkerHandle, WorkerManager } from './cluster/worker-manager.js';
import type { PoolMetrics } from './metrics/pool-metrics.js';
import type { WorkerLoad } from './metrics/worker-load.js';
import type { Pool } from './pool/pool.js';
import type { ExitAssignments } from './exits/exit-assignments.js';
import type { FleetMember } from './fleet/fleet-member.js';
import { exitsViewOf, liftBan } from './exits/exits-view.js';
import { LEASE_INVALIDATION_TIMEOUT_MS } from './routing/route-leases.js';
import { errorMessage } from '../shared/errors/error-message.js';

export interface WorkerIpcDeps {
  pool: Pool;
  /** The exit catalog and assignments; undefined when PIN_EXIT_RELAY is off. */
  exits: ExitAssignments | undefined;
  /** This node's fleet (STATE_STORE=redis://…), for the API's view of the nodes; null otherwise. */
  fleet: FleetMember | null;
  load: WorkerLoad;
  audit: AuditLog;
  metrics: PoolMetrics;
  store: AuthStore;
  auth: () => AuthOperations;
  signInLimiter: LocalSignInLimiter;
  /** Proxy workers whose listeners are up (they share the sockets: one is enough to serve). */
  proxyWorkersListening: () => number;
  /** Brings in every proxy worker's pending accounting (flushProxyAccounting). */
  flushAccounting: () => Promise<void>;
  log: Logger;
}

/** A method only workers of `role` may ask; another role asking is a programming error. */
function onlyFor(h: WorkerHandle, role: WorkerRole, method: string): void {
  if (h.role !== role) throw new ExitpoolError('EXITPOOL_WRONG_ROLE', `${method} is for the ${role} worker, not a ${h.role} worker`);
}

/**
 * The supervisor's answers to a worker's requests, as one object the compiler checks against
 * the protocol (a method without an answer does not compile). Every answer comes from memory;
 * only actions that start background work (rotate, restart, credential pushes) await anything.
 * A refusal is an ExitpoolError thrown by the pool or the auth store.
 */
export function workerRequestHandlers(h: WorkerHandle, d: WorkerIpcDeps): IpcHandlers<WorkerRequests> {
  const { pool } = d;
  // What may move a session or take an instance out answers once the proxy workers dropped the
  // route leases it made stale: the client's next connection already follows it.
  const settled = async <T>(result: T | Promise<T>): Promise<T> => {
    const value = await result;
    await pool.leasesSettled();
    return value;
  };
  return {
    ping: () => ({ receivedAt: Date.now() }),
    'health.get': () => ({ routable: pool.placement().routable.length, proxyWorkersListening: d.proxyWorkersListening() }),
    route: (p) => pool.route(p, h.slot),
    'pool.summary': () => pool.summary(),
    'pool.resize': ({ size }) => settled(pool.resize(size)),
    'pool.rotate': () => pool.rotatePool(),
    'instances.list': () => pool.instanceViews(),
    'instances.get': ({ id }) => pool.instanceView(id),
    'instances.action': ({ id, action, wipe }) => settled(pool.instanceAction(id, action, wipe ?? true)),
    // Connections routed with leases travel in the workers' batches: bring them in first.
    'sessions.list': async () => {
      await d.flushAccounting();
      return pool.sessionViews();
    },
    'sessions.get': async ({ key }) => {
      await d.flushAccounting();
      return pool.sessionView(key);
    },
    'sessions.rotate': ({ key, newnym }) => settled(pool.rotateSession(key, newnym)),
    // The sites the session reached travel in the workers' batches: bring them in before judging.
    'sessions.failure': async ({ key, report, reporter }) => {
      await d.flushAccounting();
      return settled(pool.reportFailure(key, report.kind, report.reason, reporter, report.domain));
    },
    'sessions.delete': ({ key }) => settled(pool.deleteSession(key)),
    'sessions.refusal': ({ key }) => pool.refusals.view(key),
    'sessions.owner': async ({ key }) => (pool.sessions.get(key) !== undefined || !d.fleet ? null : d.fleet.sessions.ownerElsewhere(key)),
    'exits.list': () => exitsViewOf(d.exits, pool.instanceIds(), Date.now(), d.fleet?.view() ?? null),
    'exits.unban': ({ fingerprint }) => liftBan(d.exits, fingerprint),
    'fleet.view': () => (d.fleet ? d.fleet.poolView() : { node: null, nodes: [] }),
    'events.recent': ({ limit, types }) => d.audit.recent(limit, types),
    'stats.history': ({ range }) => pool.stats.series(range),
    'metrics.text': () => d.metrics.text(),
    'credentials.proxy': () => {
      onlyFor(h, 'proxy', 'credentials.proxy');
      return d.store.snapshots().proxy;
    },
    'credentials.api': () => {
      onlyFor(h, 'api', 'credentials.api');
      return d.store.snapshots().api;
    },
    'hop.keys': () => {
      onlyFor(h, 'proxy', 'hop.keys');
      return d.fleet?.hopKeys.snapshot() ?? null;
    },
    'tokens.list': () => d.store.listTokens(),
    'tokens.create': ({ request }) => d.auth().create(request),
    'tokens.delete': ({ id }) => d.auth().revoke(id),
    'signin.attempt': ({ bucket }) => {
      onlyFor(h, 'api', 'signin.attempt');
      return d.signInLimiter.attempt(bucket);
    },
  };
}

/** Wires one worker: its requests, its notices, and what its exit leaves behind. */
export function attachWorker(h: WorkerHandle, d: WorkerIpcDeps): void {
  const ep = h.endpoint;
  const { pool } = d;
  ep.handleAll(workerRequestHandlers(h, d));
  ep.onNotice('accounting', ({ opened, reached, closes, released, routeRttMs, refused, evicted, connections }) => {
    d.load.record(h.slot, connections);
    // Opened first: a connection's close may come in the same batch as its open.
    pool.recordOpened(opened, h.slot);
    if (opened.length > 0) d.metrics.routeLeaseHits.inc(opened.length);
    pool.recordReached(reached);
    pool.recordCloses(closes, h.slot);
    pool.recordReleased(released, h.slot);
    if (refused > 0) d.metrics.connectionsRefused.inc(refused);
    if (evicted > 0) d.metrics.connectionsEvicted.inc(evicted);
    for (const c of closes) if (c.latencyMs !== null) d.metrics.dialLatency.observe(c.latencyMs / 1000);
    for (const ms of routeRttMs) d.metrics.ipcRoundTrip.observe(ms / 1000);
  });
  ep.onNotice('signed-in', ({ user, address }) => d.audit.record(signedInEvent(user, address)));
  if (h.role === 'api') ep.onNotice('signin.succeeded', ({ bucket }) => d.signInLimiter.succeeded(bucket));
  if (h.role === 'proxy') ep.onNotice('ready', () => ep.notify('session-ports', { instances: pool.instanceIds() }));
  h.worker.once('exit', () => {
    pool.workerGone(h.slot);
    d.load.forget(h.slot);
  });
}

/** How long a proxy worker may take to send its pending accounting when the supervisor asks. */
export const ACCOUNTING_FLUSH_TIMEOUT_MS = 1000;

/**
 * Sends one request to every live proxy worker and resolves once each answered. Never rejects:
 * a worker that is gone is skipped (its successor starts with nothing pending and no lease),
 * and one that fails or runs out of `timeoutMs` is logged at `level`.
 */
async function askEveryProxyWorker<M extends Known<SupervisorRequests>>(
  workers: WorkerManager,
  method: M,
  params: SupervisorRequests[M]['params'],
  timeoutMs: number,
  log: Logger,
  level: 'debug' | 'warn',
): Promise<void> {
  await Promise.all(
    workers.liveHandles('proxy').map((h) =>
      h.endpoint.request(method, params, timeoutMs).then(
        () => undefined,
        (e: unknown) => {
          if (!(e instanceof IpcPeerGoneError)) log[level](`${method} not answered by a proxy worker`, { slot: h.slot, error: errorMessage(e) });
        },
      ),
    ),
  );
}

/** A probe waits at most this long for the worker (which gives tor PROBE_TIMEOUT_MS). */
const DESTINATION_PROBE_IPC_TIMEOUT_MS = 20_000;

/** One proxy worker dials the destination through the instance named (DestinationBlame); null when none answers. */
export async function probeDestinationThroughWorker(workers: WorkerManager, probe: DestinationProbe, log: Logger): Promise<DestinationProbeResult | null> {
  const [h] = workers.liveHandles('proxy');
  if (!h) return null;
  try {
    return await h.endpoint.request('destination.probe', probe, DESTINATION_PROBE_IPC_TIMEOUT_MS);
  } catch (e) {
    log.debug('destination probe not answered', { slot: h.slot, error: errorMessage(e) });
    return null;
  }
}

/** Brings in every proxy worker's pending accounting batch (it arrives before the answer: one channel, in order). */
export function flushProxyAccounting(workers: WorkerManager, log: Logger): Promise<void> {
  return askEveryProxyWorker(workers, 'accounting.flush', null, ACCOUNTING_FLUSH_TIMEOUT_MS, log, 'debug');
}

/** Has every proxy worker drop the leases an invalidation names (a slow one still applies it when it gets there). */
export function invalidateRouteLeases(workers: WorkerManager, invalidation: RouteInvalidation, log: Logger): Promise<void> {
  return askEveryProxyWorker(workers, 'routes.invalidate', invalidation, LEASE_INVALIDATION_TIMEOUT_MS, log, 'warn');
}

export function stateSnapshot(pool: Pool): StateSnapshot {
  return { pool: pool.summary(), instances: pool.instanceViews(), stats: pool.stats.latest() };
}
