import type { Logger } from '../shared/logger.js';
import type { StateSnapshot } from '../shared/ipc/protocol.js';
import type { AuditLog } from './audit/audit-log.js';
import type { WorkerHandle } from './cluster/worker-manager.js';
import type { PoolMetrics } from './metrics/pool-metrics.js';
import type { WorkerLoad } from './metrics/worker-load.js';
import type { Pool } from './pool/pool.js';
import type { FailureKind } from './pool/health-tracker.js';

/** Reads a failure-report body into a kind and a reason; throws a typed error (→ 400) on bad types. */
export type FailureBodyReader = (body: unknown) => { kind: FailureKind; reason: string };

export interface WorkerIpcDeps {
  pool: Pool;
  load: WorkerLoad;
  audit: AuditLog;
  metrics: PoolMetrics;
  readFailure: FailureBodyReader;
  log: Logger;
}

/**
 * Registers the supervisor's answers to one worker's requests. Every answer comes from
 * memory; only actions that start background work (rotate, restart) await anything.
 */
export function attachWorker(h: WorkerHandle, d: WorkerIpcDeps): void {
  const ep = h.endpoint;
  const { pool } = d;
  ep.handle('ping', () => ({ receivedAt: Date.now() }));
  ep.handle('route', (p) => pool.route(p, h.slot));
  ep.onNotice('accounting', ({ closes, released, routeRttMs, refused, evicted, connections }) => {
    d.load.record(h.slot, connections);
    pool.recordCloses(closes, h.slot);
    pool.recordReleased(released, h.slot);
    if (refused > 0) d.metrics.connectionsRefused.inc(refused);
    if (evicted > 0) d.metrics.connectionsEvicted.inc(evicted);
    for (const c of closes) if (c.latencyMs !== null) d.metrics.dialLatency.observe(c.latencyMs / 1000);
    for (const ms of routeRttMs) d.metrics.ipcRoundTrip.observe(ms / 1000);
  });
  h.worker.once('exit', () => {
    pool.workerGone(h.slot);
    d.load.forget(h.slot);
  });

  ep.handle('pool.summary', () => pool.summary());
  ep.handle('pool.resize', ({ size }) => pool.resize(size));
  ep.handle('pool.rotate', () => pool.rotatePool());
  ep.handle('instances.list', () => pool.instanceViews());
  ep.handle('instances.get', ({ id }) => pool.instanceView(id));
  ep.handle('instances.action', ({ id, action, wipe }) => pool.instanceAction(id, action, wipe ?? true));
  ep.handle('sessions.list', () => pool.sessionViews());
  ep.handle('sessions.get', ({ key }) => pool.sessionView(key));
  ep.handle('sessions.rotate', ({ key, newnym }) => pool.rotateSession(key, newnym));
  ep.handle('sessions.failure', ({ key, body, reporter }) => {
    let report: { kind: FailureKind; reason: string };
    try {
      report = d.readFailure(body);
    } catch (e) {
      return { ok: false as const, error: { status: 400 as const, message: (e as Error).message } };
    }
    return pool.reportFailure(key, report.kind, report.reason, reporter);
  });
  ep.handle('sessions.delete', ({ key }) => pool.deleteSession(key));
  ep.handle('events.recent', ({ limit, types }) => d.audit.recent(limit, types));
  ep.handle('stats.history', ({ range }) => pool.stats.series(range));
  ep.handle('metrics.text', () => d.metrics.text());
}

export function stateSnapshot(pool: Pool): StateSnapshot {
  return { pool: pool.summary(), instances: pool.instanceViews(), stats: pool.stats.latest() };
}
