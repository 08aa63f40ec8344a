/**
 * Typed reads of the management API for the proxy end-to-end tests, and polling with a
 * deadline (accounting reaches the supervisor in batches, exits are confirmed asynchronously,
 * so tests wait for a condition instead of sleeping).
 */
import type { InstanceView, PoolSummary, SessionView } from '../../../shared/api/views.js';
import type { RunningService } from '../fixtures/service.js';
import { pollUntil } from '../waiting.js';

export class UnexpectedApiStatusError extends Error {
  constructor(readonly path: string, readonly status: number, readonly body: string) {
    super(`${path} answered ${status}: ${body}`);
    this.name = 'UnexpectedApiStatusError';
  }
}

/** GET (or another method) that must answer `expected`; returns the parsed JSON body. */
export async function apiJson<T>(svc: RunningService, path: string, bearer: string | undefined, init: { method?: string; body?: unknown; expected?: number } = {}): Promise<T> {
  const r = await svc.api(path, { method: init.method ?? 'GET', ...(bearer === undefined ? {} : { bearer }), ...(init.body === undefined ? {} : { body: init.body }) });
  const text = await r.text();
  if (r.status !== (init.expected ?? 200)) throw new UnexpectedApiStatusError(path, r.status, text);
  return (text === '' ? null : JSON.parse(text)) as T;
}

export function instanceView(svc: RunningService, id: number, bearer: string): Promise<InstanceView> {
  return apiJson<InstanceView>(svc, `/api/instances/${id}`, bearer);
}

export function instanceViews(svc: RunningService, bearer: string): Promise<InstanceView[]> {
  return apiJson<InstanceView[]>(svc, '/api/instances', bearer);
}

export function poolSummary(svc: RunningService, bearer: string): Promise<PoolSummary> {
  return apiJson<PoolSummary>(svc, '/api/pool', bearer);
}

/** The session by key, or null when the API answers 404. */
export async function sessionView(svc: RunningService, key: string, bearer: string | undefined): Promise<SessionView | null> {
  const path = `/api/sessions/${encodeURIComponent(key)}`;
  const r = await svc.api(path, bearer === undefined ? {} : { bearer });
  if (r.status === 404) return null;
  const text = await r.text();
  if (r.status !== 200) throw new UnexpectedApiStatusError(path, r.status, text);
  return JSON.parse(text) as SessionView;
}

/** Polls an instance until `accept` holds for its view; returns that view. */
export function instanceWhen(svc: RunningService, id: number, bearer: string, what: string, accept: (v: InstanceView) => boolean, timeoutMs = 15_000): Promise<InstanceView> {
  return pollUntil(`instance ${id}: ${what}`, () => instanceView(svc, id, bearer), timeoutMs, { until: accept });
}

/** Exit IP a whoami answer names (the body is the caller's address and a newline). */
export function whoamiIp(body: string | null): string {
  const ip = (body ?? '').trim();
  if (!/^127\.\d+\.\d+\.\d+$/.test(ip)) throw new Error(`not a whoami answer: ${JSON.stringify(body)}`);
  return ip;
}

/** Polls a session until it exists and `accept` holds for it; returns that view. */
export async function sessionWhen(svc: RunningService, key: string, bearer: string, what: string, accept: (s: SessionView) => boolean, timeoutMs = 15_000): Promise<SessionView> {
  const found = await pollUntil(`session ${key}: ${what}`, async () => (await sessionView(svc, key, bearer)) ?? undefined, timeoutMs, { until: accept });
  return found;
}

/** Polls the pool summary until `accept` holds; returns that summary. */
export function poolWhen(svc: RunningService, bearer: string, what: string, accept: (p: PoolSummary) => boolean, timeoutMs = 30_000): Promise<PoolSummary> {
  return pollUntil(`pool: ${what}`, () => poolSummary(svc, bearer), timeoutMs, { until: accept, intervalMs: 250 });
}
