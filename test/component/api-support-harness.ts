import http from 'node:http';
import type { AddressInfo } from 'node:net';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ApiAuthenticator } from '../../shared/auth/api-authenticator.js';
import type { RateLimit } from '../../shared/config/values.js';
import { AuthOperations } from '../../supervisor/auth-operations.js';
import { AuditLog } from '../../supervisor/audit/audit-log.js';
import { AuthStore } from '../../supervisor/auth/auth-store.js';
import type { WorkerManager } from '../../supervisor/cluster/worker-manager.js';
import { createApiApp } from '../../workers/api/api-app.js';
import { authRoutes } from '../../workers/api/auth-routes.js';
import { POOL_ROUTES, type ApiRoute } from '../../workers/api/route-table.js';
import type { RequestOriginPolicy } from '../../workers/api/request-origin.js';
import { credentialUpdateHandler } from '../../workers/api/credential-updates.js';
import { SseHub, type SseHubOptions } from '../../workers/api/sse-hub.js';
import { FakeSupervisorIpc, type CannedData } from '../support/fake-supervisor-ipc.js';
import { documentationGaps, loadOpenApiDocument, type ObservedResponse } from '../support/openapi-document.js';
import type { Logger } from '../../shared/logger.js';
import { quietLogger } from '../support/quiet-logger.js';

/**
 * The real API app (createApiApp with the real route table, authenticator and SSE hub) on
 * 127.0.0.1:0, wired as api-worker.ts wires it, with the supervisor replaced by
 * FakeSupervisorIpc. Credentials come from a real AuthStore in a temporary DATA_DIR, and token
 * issue/revoke go through the real AuthOperations, which pushes the new snapshot over IPC to
 * this worker's `credentials.update` handler, exactly as in the service.
 */

export const ADMIN_USER = 'operator';
export const ADMIN_PASSWORD = 'TEST_ADMIN_PASSWORD';
/** PROXY_TOKEN: a proxy-scope token from configuration (source `config`, not revocable). */
export const PROXY_TOKEN = 'tp_TESTPROXYTOKEN0000000a';
export const LOGIN_TTL_MS = 60 * 60_000;

export interface HarnessOptions {
  authDisabled?: boolean;
  loginRateLimit?: RateLimit;
  /** Worker-side IPC deadline for requests that use the default (GET /api/pool, ...). */
  ipcTimeoutMs?: number;
  dashboardDir?: string | null;
  data?: CannedData;
  hub?: SseHubOptions;
  origin?: RequestOriginPolicy;
  /** The logger of the routes (quiet by default). */
  log?: Logger;
}

export interface ApiResponse {
  status: number;
  headers: Headers;
  text: string;
  /** The body parsed as JSON (throws when it is not JSON). */
  json(): unknown;
}

export interface RequestOptions {
  method?: string;
  /** Sent as `Authorization: Bearer <bearer>`. */
  bearer?: string;
  /** JSON-encoded; sets Content-Type application/json. */
  body?: unknown;
  /** Sent as is (with Content-Type application/json unless `headers` says otherwise). */
  rawBody?: string;
  headers?: Record<string, string>;
}

export interface ApiHarness {
  base: string;
  fake: FakeSupervisorIpc;
  auth: ApiAuthenticator;
  hub: SseHub;
  store: AuthStore;
  audit: AuditLog;
  routes: readonly ApiRoute[];
  /** An admin-scope token minted in the store before the app started. */
  adminToken: string;
  /** The proxy-scope token generated on first boot (source `store`). */
  storeProxyToken: string;
  clock: { now: number };
  /** Every response `request` received, for checking against docs/openapi.yaml. */
  observed: ObservedResponse[];
  request(pathAndQuery: string, options?: RequestOptions): Promise<ApiResponse>;
  /** Signs in with the admin password; returns the session credential (JWT). */
  login(): Promise<string>;
  ticket(): Promise<string>;
  close(): Promise<void>;
}

export async function startApiHarness(options: HarnessOptions = {}): Promise<ApiHarness> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-api-test-'));
  const log = quietLogger();
  const clock = { now: Date.now() };
  const { store, generated } = await AuthStore.open({
    config: { adminUser: ADMIN_USER, adminPassword: ADMIN_PASSWORD, proxyToken: PROXY_TOKEN, authDisabled: options.authDisabled ?? false, dataDir },
    log,
    bcryptCost: 4,
  });
  const admin = await store.createToken({ name: 'test admin', scope: 'admin' });
  const storeProxyToken = generated.proxyToken?.secret;
  if (storeProxyToken === undefined) throw new Error('first boot generated no proxy token');

  const auth = new ApiAuthenticator(
    store.snapshots().api,
    { loginTtlMs: LOGIN_TTL_MS, loginRateLimit: options.loginRateLimit ?? { attempts: 1000, windowMs: 60_000 } },
    { now: () => clock.now },
  );
  const fake = new FakeSupervisorIpc({ timeoutMs: options.ipcTimeoutMs ?? 2000, ...(options.data ? { data: options.data } : {}) });
  const hub = new SseHub(options.hub);
  // As api-worker.ts: the supervisor pushes snapshots; the worker swaps them in, ends revoked streams and acknowledges.
  fake.worker.handle('credentials.update.api', credentialUpdateHandler(auth, hub));
  const audit = new AuditLog();
  const workers = { handles: () => [{ role: 'api', endpoint: fake.supervisor }] } as unknown as WorkerManager;
  const operations = new AuthOperations(store, workers, audit, log);
  fake.useTokens({ list: () => store.listTokens(), create: (request) => operations.create(request), revoke: (id) => operations.revoke(id) });

  let latestState: string | null = null;
  fake.worker.onNotice('state', (snapshot) => {
    latestState = SseHub.frame('state', snapshot);
    hub.publish('state', snapshot);
  });
  fake.worker.onNotice('event', (event) => hub.publish('event', event));

  const routes = [...authRoutes(() => auth, options.log ?? log), ...POOL_ROUTES];
  const app = createApiApp({
    routes,
    authenticator: () => auth,
    ipc: fake.worker,
    hub,
    initialStreamFrames: () => (latestState ? [latestState] : []),
    dashboardDir: options.dashboardDir ?? null,
    origin: options.origin ?? { bindHost: '127.0.0.1', allowedHosts: [] },
    log,
  });
  const server = http.createServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const observed: ObservedResponse[] = [];
  const request = async (pathAndQuery: string, o: RequestOptions = {}): Promise<ApiResponse> => {
    const headers: Record<string, string> = {};
    if (o.bearer !== undefined) headers.authorization = `Bearer ${o.bearer}`;
    let body: string | undefined;
    if (o.body !== undefined) body = JSON.stringify(o.body);
    if (o.rawBody !== undefined) body = o.rawBody;
    // fetch cannot send a body with GET or HEAD; walks over the table pass one to every route.
    const method = o.method ?? 'GET';
    if (method === 'GET' || method === 'HEAD') body = undefined;
    if (body !== undefined) headers['content-type'] = 'application/json';
    Object.assign(headers, o.headers ?? {});
    const res = await fetch(base + pathAndQuery, { method, headers, ...(body === undefined ? {} : { body }), redirect: 'manual' });
    const text = await res.text();
    observed.push({ method, path: pathAndQuery, status: res.status, contentType: res.headers.get('content-type'), body: text });
    return { status: res.status, headers: res.headers, text, json: () => JSON.parse(text) as unknown };
  };
  const login = async (): Promise<string> => {
    const r = await request('/api/auth/login', { method: 'POST', body: { user: ADMIN_USER, password: ADMIN_PASSWORD } });
    if (r.status !== 200) throw new Error(`login answered ${r.status}: ${r.text}`);
    return (r.json() as { token: string }).token;
  };
  const ticket = async (): Promise<string> => {
    const r = await request('/api/auth/ticket', { method: 'POST', bearer: await login() });
    if (r.status !== 200) throw new Error(`ticket answered ${r.status}: ${r.text}`);
    return (r.json() as { ticket: string }).ticket;
  };

  return {
    base,
    fake,
    auth,
    hub,
    store,
    audit,
    routes,
    adminToken: admin.token.secret,
    storeProxyToken,
    clock,
    observed,
    request,
    login,
    ticket,
    close: async () => {
      hub.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      fake.close();
      await store.idle();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Route table path (`:id`) to a concrete path with sample values. */
export function concretePath(route: Pick<ApiRoute, 'path'>, values: Record<string, string> = {}): string {
  return route.path.replace(/:(\w+)/g, (_m, name: string) => values[name] ?? { id: '0', key: 'alice' }[name] ?? 'x');
}

/**
 * Every response the harness saw, checked against docs/openapi.yaml: its status is documented
 * for the operation, its media type is listed, and a JSON body conforms to the schema. Call
 * it at the end of a file's tests, so whatever they provoked keeps the document honest.
 */
export function undocumentedResponses(h: ApiHarness): string[] {
  const doc = loadOpenApiDocument();
  return [...new Set(h.observed.flatMap((o) => documentationGaps(doc, o)))];
}
