/**
 * Typed reads of the management API for the fault, hostile-input and load tests.
 */
import type { InstanceView, PoolSummary, SessionView } from '../../shared/api/views.js';
import { ACCOUNTING_FLUSH_MS } from '../../shared/ipc/protocol.js';
import { pollUntil } from './fault-processes.js';
import type { RunningService } from './service-fixture.js';

export class ApiStatusError extends Error {
  constructor(
    readonly path: string,
    readonly status: number,
    body: string,
  ) {
    super(`${path} answered ${status}: ${body.trim().slice(0, 300)}`);
    this.name = 'ApiStatusError';
  }
}

export async function apiJson<T>(svc: RunningService, path: string, bearer: string): Promise<T> {
  const r = await svc.api(path, { bearer });
  if (r.status !== 200) throw new ApiStatusError(path, r.status, await r.text());
  return (await r.json()) as T;
}

export const poolSummary = (svc: RunningService, bearer: string): Promise<PoolSummary> => apiJson<PoolSummary>(svc, '/api/pool', bearer);
export const instances = (svc: RunningService, bearer: string): Promise<InstanceView[]> => apiJson<InstanceView[]>(svc, '/api/instances', bearer);
export const instance = (svc: RunningService, bearer: string, id: number): Promise<InstanceView> =>
  apiJson<InstanceView>(svc, `/api/instances/${id}`, bearer);
export const sessions = (svc: RunningService, bearer: string): Promise<SessionView[]> => apiJson<SessionView[]>(svc, '/api/sessions', bearer);
export const session = (svc: RunningService, bearer: string, key: string): Promise<SessionView> =>
  apiJson<SessionView>(svc, `/api/sessions/${encodeURIComponent(key)}`, bearer);

/** The pool totals once two reads a few flush intervals apart agree (every batch has arrived). */
export async function settledTotals(svc: RunningService, bearer: string): Promise<PoolSummary['totals']> {
  let previous = (await poolSummary(svc, bearer)).totals;
  return pollUntil(
    'pool totals settled',
    async () => {
      await new Promise((r) => setTimeout(r, 3 * ACCOUNTING_FLUSH_MS));
      const now = (await poolSummary(svc, bearer)).totals;
      const same = now.requests === previous.requests && now.failures === previous.failures;
      previous = now;
      return same ? now : undefined;
    },
    15_000,
    0,
  );
}

