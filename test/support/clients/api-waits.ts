/**
 * Typed reads of the management API for the fault, hostile-input and load tests, on top of the
 * one request helper in api-reads.ts.
 */
import type { InstanceView, PoolSummary, SessionView } from '../../../shared/api/views.js';
import { apiJson, instanceView, instanceViews, poolSummary } from './api-reads.js';
import { ACCOUNTING_FLUSH_MS } from '../../../shared/ipc/protocol.js';
import { pollUntil } from '../waiting.js';
import type { RunningService } from '../fixtures/service.js';

export { apiJson, poolSummary } from './api-reads.js';

// The fault, hostile-input and load tests name the credential before the resource.
export const instances = (svc: RunningService, bearer: string): Promise<InstanceView[]> => instanceViews(svc, bearer);
export const instance = (svc: RunningService, bearer: string, id: number): Promise<InstanceView> => instanceView(svc, id, bearer);
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

