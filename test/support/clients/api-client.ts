import type { AuditEvent } from '../../../shared/api/audit-event.js';
import type { FailureResult, InstanceView, PoolRotateResult, PoolSummary, ResizeResult, SessionView } from '../../../shared/api/views.js';
import { TEST_PROXY_TOKEN, type RunningService } from '../fixtures/service.js';

export class UnexpectedStatusError extends Error {
  constructor(readonly method: string, readonly path: string, readonly status: number, body: string) {
    super(`${method} ${path} answered ${status}: ${body.trim()}`);
    this.name = 'UnexpectedStatusError';
  }
}

export type InstanceActionName = 'rotate' | 'restart' | 'quarantine' | 'release' | 'drain';

/**
 * The management API as the end-to-end tests drive it: admin calls with a sign-in credential,
 * session calls with the proxy token (the scope a real client has). Each typed call asserts
 * its success status; `raw` returns the Response for error-code checks.
 */
export class HealApi {
  constructor(
    readonly svc: RunningService,
    readonly adminBearer: string,
  ) {}

  static async signIn(svc: RunningService): Promise<HealApi> {
    return new HealApi(svc, await svc.login());
  }

  raw(path: string, init: { method?: string; body?: unknown; bearer?: string | null } = {}): Promise<Response> {
    const bearer = init.bearer === null ? undefined : (init.bearer ?? this.adminBearer);
    return this.svc.api(path, { ...(init.method ? { method: init.method } : {}), ...(init.body === undefined ? {} : { body: init.body }), ...(bearer ? { bearer } : {}) });
  }

  async json<T>(path: string, init: { method?: string; body?: unknown; bearer?: string | null } = {}, expected = 200): Promise<T> {
    const r = await this.raw(path, init);
    const text = await r.text();
    if (r.status !== expected) throw new UnexpectedStatusError(init.method ?? 'GET', path, r.status, text);
    return JSON.parse(text) as T;
  }

  pool(): Promise<PoolSummary> {
    return this.json('/api/pool');
  }
  instances(): Promise<InstanceView[]> {
    return this.json('/api/instances');
  }
  instance(id: number): Promise<InstanceView> {
    return this.json(`/api/instances/${id}`);
  }
  action(id: number, action: InstanceActionName): Promise<InstanceView> {
    return this.json(`/api/instances/${id}/${action}`, { method: 'POST' });
  }
  session(key: string): Promise<SessionView> {
    return this.json(`/api/sessions/${encodeURIComponent(key)}`, { bearer: TEST_PROXY_TOKEN });
  }
  sessions(): Promise<SessionView[]> {
    return this.json('/api/sessions');
  }
  /** A new proxy token's secret; tokens of different `owner`s are independent reporters. */
  async issueProxyToken(name: string, owner?: string): Promise<string> {
    const body = owner === undefined ? { name, scope: 'proxy' } : { name, scope: 'proxy', owner };
    return (await this.json<{ secret: string }>('/api/tokens', { method: 'POST', body }, 201)).secret;
  }
  /** A failure report under `bearer`: the credential whose budget it spends and whose sessions it moves. */
  reportFailure(key: string, body?: unknown, bearer = TEST_PROXY_TOKEN): Promise<FailureResult> {
    return this.json(`/api/sessions/${encodeURIComponent(key)}/failure`, { method: 'POST', body, bearer });
  }
  events(limit?: number): Promise<AuditEvent[]> {
    return this.json(limit === undefined ? '/api/events' : `/api/events?limit=${limit}`);
  }
  /** The newest `limit` audit events, one line each (time, type, message): what a failed assertion prints. */
  async trail(limit = 40): Promise<string[]> {
    return (await this.events(limit)).map((e) => `${e.time} ${e.type} ${e.message}`);
  }
  resize(size: number): Promise<ResizeResult> {
    return this.json('/api/pool/resize', { method: 'POST', body: { size } }, 202);
  }
  rotatePool(): Promise<PoolRotateResult> {
    return this.json('/api/pool/rotate', { method: 'POST' });
  }
  async metricsText(): Promise<{ status: number; contentType: string; text: string }> {
    const r = await this.raw('/metrics', { bearer: null });
    return { status: r.status, contentType: r.headers.get('content-type') ?? '', text: await r.text() };
  }
  async health(): Promise<number> {
    const r = await this.raw('/health', { bearer: null });
    await r.text();
    return r.status;
  }
}

/**
 * Releases the instance session `key` is on when earlier scenarios' reports weigh on it: one more
 * report would quarantine it, and the quarantine (not the client) would decide where the session
 * goes next.
 */
export async function freshWindow(api: HealApi, key: string): Promise<void> {
  const instance = (await api.session(key)).instance;
  if ((await api.instance(instance)).health.failure_score > 0) await api.action(instance, 'release');
}
