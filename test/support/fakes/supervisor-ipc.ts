import type { AuditEvent } from '../../../shared/api/audit-event.js';
import type {
  HealthView,
  InstanceView,
  PoolRotateResult,
  PoolSummary,
  SessionView,
  StatsSample,
} from '../../../shared/api/views.js';
import type { RouteRefusalView } from '../../../shared/api/route-refusal.js';
import type { CreatedToken, TokenRecord } from '../../../shared/auth/token-record.js';
import { MAX_POOL_SIZE } from '../../../shared/config/config.js';
import { IpcEndpoint, type Known } from '../../../shared/ipc/endpoint.js';
import { ExitpoolError, type ErrorCode } from '../../../shared/errors/catalogue.js';
import type { TokenCreateRequest } from '../../../shared/auth/token-request.js';
import {
  WORKER_REQUEST_TIMEOUTS_MS,
  type StateSnapshot,
  type SupervisorEndpoint,
  type WorkerEndpoint,
  type WorkerRequests,
} from '../../../shared/ipc/protocol.js';
import { channelPair } from './memory-channel.js';

/**
 * A stand-in for the supervisor on the other end of the API worker's IPC channel. The API app
 * gets `worker`, a real WorkerEndpoint over an in-memory channel (messages are JSON-copied as
 * on real IPC, deadlines are real); the supervisor side answers every request from `data`,
 * records it, and can be told to stall a method (→ IpcTimeoutError) or to vanish (→
 * IpcPeerGoneError). Refusals are thrown as the supervisor throws them: an ExitpoolError whose
 * catalogue code crosses the channel.
 */

/** An instance as the pool reports it: the documented fields plus `draining`, `rotating` and `responsive`. */
export type PoolInstanceView = InstanceView;

export interface CannedData {
  pool: PoolSummary;
  /** Proxy workers whose listeners are up (GET /health). */
  proxyWorkersListening: number;
  instances: PoolInstanceView[];
  sessions: SessionView[];
  /** Newest first, as the audit ring returns them. */
  events: AuditEvent[];
  stats: { fine: StatsSample[]; long: StatsSample[] };
  /** SESSION_PORT_BASE, or null when session ports are off. */
  sessionPortBase: number | null;
  poolRotate: PoolRotateResult;
  metrics: { contentType: string; text: string };
  /** Route refusals by session key (GET /api/sessions/{key}/refusal); absent: none. */
  refusals?: Record<string, RouteRefusalView>;
}

/** Token issue and revoke as the supervisor does them (AuthOperations in the service). */
export interface TokenOperations {
  list(): TokenRecord[] | Promise<TokenRecord[]>;
  create(request: TokenCreateRequest): Promise<CreatedToken>;
  revoke(id: string): Promise<null>;
}

export interface RecordedCall {
  method: keyof WorkerRequests & string;
  params: unknown;
}

type Method = Known<WorkerRequests>;
type Handler<M extends Method> = (params: WorkerRequests[M]['params']) => WorkerRequests[M]['result'] | Promise<WorkerRequests[M]['result']>;

export interface FakeSupervisorOptions {
  /** The worker side's default request deadline (the real one is DEFAULT_IPC_TIMEOUT_MS). */
  timeoutMs?: number;
  data?: CannedData;
  tokens?: TokenOperations;
}

/** A refusal, as the supervisor throws it. */
export function refuse(code: ErrorCode, message: string): never {
  throw new ExitpoolError(code, message);
}

export class FakeSupervisorIpc {
  readonly worker: WorkerEndpoint;
  readonly supervisor: SupervisorEndpoint;
  readonly calls: RecordedCall[] = [];
  /** `signed-in` notices the API worker sent. */
  readonly signIns: { user: string; address: string }[] = [];
  data: CannedData;
  private readonly cutChannel: () => void;
  private readonly stalled = new Set<Method>();
  private readonly overrides = new Map<Method, (params: unknown) => unknown>();
  private tokens: TokenOperations;

  constructor(options: FakeSupervisorOptions = {}) {
    const ch = channelPair();
    // The worker's deadlines as in the service: the per-method table, the default for the rest.
    this.worker = new IpcEndpoint(ch.a, options.timeoutMs, WORKER_REQUEST_TIMEOUTS_MS);
    this.supervisor = new IpcEndpoint(ch.b, 10_000);
    this.cutChannel = ch.cut;
    this.data = options.data ?? cannedData();
    this.tokens = options.tokens ?? cannedTokens();
    this.supervisor.onNotice('signed-in', (n) => this.signIns.push(n));
    this.registerAll();
  }

  /** Replaces the answer to one method (for refusals the canned data cannot produce). */
  answer<M extends Method>(method: M, handler: Handler<M>): void {
    this.overrides.set(method, handler as (params: unknown) => unknown);
  }

  /** Back to the canned answers, for one method or all (undoes answer and stall). */
  restore(method?: Method): void {
    if (method === undefined) {
      this.overrides.clear();
      this.stalled.clear();
      return;
    }
    this.overrides.delete(method);
    this.stalled.delete(method);
  }

  /** The method is received and recorded but never answered: the worker's deadline fires. */
  stall(method: Method): void {
    this.stalled.add(method);
  }

  /** The supervisor is gone: every pending and later request fails at once. */
  cut(): void {
    this.cutChannel();
  }

  useTokens(tokens: TokenOperations): void {
    this.tokens = tokens;
  }

  callsOf<M extends Method>(method: M): WorkerRequests[M]['params'][] {
    return this.calls.filter((c) => c.method === method).map((c) => c.params as WorkerRequests[M]['params']);
  }

  /** As the service's tick does: a state snapshot to the API worker. */
  pushState(snapshot: StateSnapshot = this.snapshot()): void {
    this.supervisor.notify('state', snapshot);
  }

  pushEvent(event: AuditEvent): void {
    this.supervisor.notify('event', event);
  }

  snapshot(): StateSnapshot {
    const fine = this.data.stats.fine;
    return { pool: this.data.pool, instances: this.data.instances, stats: fine[fine.length - 1] ?? null };
  }

  close(): void {
    this.worker.close();
    this.supervisor.close();
  }

  private registerAll(): void {
    const d = (): CannedData => this.data;
    const instance = (id: number): PoolInstanceView | undefined => d().instances.find((i) => i.id === id);
    const session = (key: string): SessionView | undefined => d().sessions.find((s) => s.key === key);
    this.on('pool.summary', () => d().pool);
    this.on('health.get', () => ({ routable: d().pool.routable, proxyWorkersListening: d().proxyWorkersListening }));
    this.on('pool.resize', ({ size }) => {
      if (!Number.isInteger(size) || size < 1 || size > MAX_POOL_SIZE) return refuse('EXITPOOL_INVALID_REQUEST', `size must be from 1 to ${MAX_POOL_SIZE}`);
      const ids = d().instances.map((i) => i.id).sort((a, b) => a - b);
      const removing = ids.length > size ? ids.slice(size) : [];
      const adding: number[] = [];
      for (let id = 0; adding.length < size - ids.length; id++) if (!ids.includes(id)) adding.push(id);
      return { size, previous: d().pool.config.pool_size, adding, removing };
    });
    this.on('pool.rotate', () => d().poolRotate);
    this.on('instances.list', () => d().instances);
    this.on('instances.get', ({ id }) => {
      const i = instance(id);
      return i ?? refuse('EXITPOOL_NO_SUCH_INSTANCE', `no instance ${id}`);
    });
    this.on('instances.action', ({ id, action }) => {
      const i = instance(id);
      if (!i) return refuse('EXITPOOL_NO_SUCH_INSTANCE', `no instance ${id}`);
      if (action === 'rotate' && !i.ready) return refuse('EXITPOOL_NOT_BOOTSTRAPPED', `instance ${id} has not bootstrapped; it cannot be rotated yet`);
      if (action === 'quarantine' && i.health.state === 'quarantined') {
        return refuse('EXITPOOL_INSTANCE_STATE', `instance ${id} is quarantined; only a routable instance can be quarantined`);
      }
      const after: PoolInstanceView = { ...i, health: { ...i.health } };
      if (action === 'rotate') after.rotating = true;
      if (action === 'drain') after.draining = true;
      if (action === 'quarantine') after.health.state = 'quarantined';
      if (action === 'release') {
        after.draining = false;
        after.health.state = 'healthy';
      }
      return after;
    });
    this.on('sessions.list', () => d().sessions);
    this.on('sessions.get', ({ key }) => {
      const s = session(key);
      if (!s) return refuse('EXITPOOL_NO_SUCH_SESSION', 'no such session');
      const base = d().sessionPortBase;
      return base === null ? s : { ...s, session_port: base + s.instance };
    });
    this.on('sessions.rotate', ({ key }) => {
      const s = session(key);
      if (!s) return refuse('EXITPOOL_NO_SUCH_SESSION', 'no such session');
      const to = d().instances.find((i) => i.id !== s.instance && i.ready) ?? instance(s.instance);
      return { session: key, instance: to?.id ?? s.instance, exit_ip: to?.exit_ip ?? '', exit_confirmed: to?.exit_confirmed ?? false, new_exit: true, exit_note: '' };
    });
    this.on('sessions.failure', ({ key, report }) => {
      const s = session(key);
      if (!s) return refuse('EXITPOOL_NO_SUCH_SESSION', 'no such session');
      return { session: key, instance: s.instance, kind: report.kind, scored: true, moved: false, exit_ip: '', new_exit: false, exit_note: 'a fake supervisor moves nothing' };
    });
    this.on('sessions.refusal', ({ key }) => {
      const refusals = d().refusals ?? {};
      return { session: key, refusal: Object.hasOwn(refusals, key) ? (refusals[key] as RouteRefusalView) : null };
    });
    this.on('sessions.delete', ({ key }) => {
      const before = d().sessions.length;
      d().sessions = d().sessions.filter((s) => s.key !== key);
      return d().sessions.length < before ? null : refuse('EXITPOOL_NO_SUCH_SESSION', 'no such session');
    });
    this.on('events.recent', ({ limit, types }) => d().events.filter((e) => types === undefined || types.includes(e.type)).slice(0, limit));
    this.on('stats.history', ({ range }) => d().stats[range]);
    this.on('fleet.view', () => ({ node: null, nodes: [] }));
    this.on('metrics.text', () => d().metrics);
    this.on('tokens.list', () => this.tokens.list());
    this.on('tokens.create', ({ request }) => this.tokens.create(request));
    this.on('tokens.delete', ({ id }) => this.tokens.revoke(id));
    this.on('ping', () => ({ receivedAt: Date.now() }));
  }

  private on<M extends Method>(method: M, canned: Handler<M>): void {
    this.supervisor.handle(method, (params) => {
      this.calls.push({ method, params });
      if (this.stalled.has(method)) return new Promise<never>(() => undefined);
      const override = this.overrides.get(method);
      return (override ? override(params) : canned(params)) as WorkerRequests[M]['result'];
    });
  }
}

/** A complete health object; every field docs/api.md names. */
export function cannedHealth(overrides: Partial<HealthView> = {}): HealthView {
  return {
    state: 'healthy',
    failures_in_window: 1,
    consecutive_failures: 0,
    failure_score: 1.5,
    quarantine_score: 5,
    transport_failures: 0,
    client_failures: 1,
    failures_by_kind: { captcha: 1 },
    remediations: 0,
    remediation_rung: 'none',
    ...overrides,
  };
}

export function cannedInstance(id: number, overrides: Partial<PoolInstanceView> = {}): PoolInstanceView {
  return {
    id,
    ready: true,
    running: true,
    bootstrap: 100,
    pid: 4000 + id,
    uptime_secs: 120,
    sessions: 1,
    socks_addr: `127.0.0.1:${19050 + 2 * id}`,
    exit_ip: `127.0.0.${30 + id}`,
    exit_country: 'zz',
    exit_nickname: `exit${id}`,
    retired_exit_ip: '',
    exit_confirmed: true,
    published_exit_ip: `127.0.0.${30 + id}`,
    exit_ip_source: 'probe',
    exit_ip_measured_at: '2024-05-01T12:00:00.000Z',
    pinned_exit: '',
    health: cannedHealth(),
    totals: { requests: 10, failures: 1, bytes_up: 1000, bytes_down: 20000, latency_ms: 12.5 },
    draining: false,
    spare: false,
    rotating: false,
    responsive: true,
    assigned_exit: null,
    exit_shortage: '',
    ...overrides,
  };
}

export function cannedStatsSample(time: number, intervalSecs: number): StatsSample {
  return {
    time: new Date(time).toISOString(),
    interval_secs: intervalSecs,
    requests: 3,
    failures: 1,
    bytes_up: 300,
    bytes_down: 9000,
    latency_ms: { p50: 10, p90: 20, p99: 40 },
    sessions: 2,
    routable: 2,
  };
}

/**
 * A three-instance pool: 0 and 1 healthy and ready, 2 still bootstrapping (so rotating it is a
 * 409); two sessions; a few audit events; short stats series.
 */
export function cannedData(): CannedData {
  const now = Date.parse('2030-01-01T00:00:00.000Z');
  const iso = (ms: number): string => new Date(ms).toISOString();
  const instances = [
    cannedInstance(0),
    cannedInstance(1),
    cannedInstance(2, {
      ready: false,
      bootstrap: 45,
      uptime_secs: 5,
      sessions: 0,
      exit_ip: '',
      exit_country: '',
      exit_nickname: '',
      exit_confirmed: false,
      health: cannedHealth({ state: 'starting', failures_in_window: 0, failure_score: 0, client_failures: 0, failures_by_kind: {} }),
    }),
  ];
  const session = (key: string, instance: number): SessionView => ({
    key,
    instance,
    created_at: iso(now - 60_000),
    last_seen: iso(now - 1000),
    requests: 4,
    failures: 0,
    bytes_up: 400,
    bytes_down: 8000,
    active: 1,
    exit_ip: '',
    exit_country: '',
    recent_exits: [],
    params: { countries: [], lifetime_secs: null, mode: 'sticky' },
  });
  const events: AuditEvent[] = [5, 4, 3, 2, 1].map((id) => ({
    id,
    time: iso(now - (6 - id) * 1000),
    type: id % 2 === 0 ? 'assignment' : 'rotate',
    instance: id % 2,
    session: id % 2 === 0 ? 'alice' : null,
    message: `event ${id}`,
    details: { from: null, to: id % 2 },
  }));
  return {
    pool: {
      version: '0.1.0',
      size: 3,
      ready: 2,
      routable: 2,
      sessions: 2,
      spares: { size: 0, ready: 0, warm: 0, in_use: 0 },
      totals: { requests: 20, failures: 2, bytes_up: 2000, bytes_down: 40000 },
      socks_port: 9250,
      http_port: 9251,
      config: {
        pool_size: 3,
        warm_spares: 0,
        session_ttl: '10m0s',
        default_session: 'ip',
        min_ready: 1,
        max_sessions: 10000,
        pin_exit_relay: false,
        drain_on_rotate: true,
        auth_disabled: false,
        quarantine_failures: 5,
        quarantine_consecutive: 3,
        failure_window: '5m0s',
        session_port_base: null,
      },
    },
    instances,
    proxyWorkersListening: 2,
    sessions: [session('alice', 0), session('bob', 1)],
    events,
    stats: {
      fine: [0, 1, 2].map((i) => cannedStatsSample(now - (3 - i) * 1000, 1)),
      long: [0, 1].map((i) => cannedStatsSample(now - (2 - i) * 60_000, 60)),
    },
    sessionPortBase: null,
    poolRotate: { rotating: 2, in_progress: true },
    metrics: { contentType: 'text/plain; version=0.0.4; charset=utf-8', text: '# HELP pool_instances_routable x\n# TYPE pool_instances_routable gauge\npool_instances_routable 2\n' },
  };
}

/** Token operations over an in-memory list, for tests that do not need the real credential store. */
export function cannedTokens(): TokenOperations {
  const tokens: TokenRecord[] = [{ id: 'cfg0000000', name: 'PROXY_TOKEN', scope: 'proxy', source: 'config', created_at: 1_900_000_000, owner: '' }];
  let n = 0;
  return {
    list: () => tokens,
    create: async (request) => {
      const record: TokenRecord = { id: `tok${++n}`, name: request.name, scope: request.scope, source: 'store', created_at: 1_900_000_000, owner: request.owner ?? '' };
      tokens.push(record);
      return { ...record, secret: `tp_${'a'.repeat(21)}${n}` };
    },
    revoke: async (id) => {
      const i = tokens.findIndex((t) => t.id === id);
      if (i < 0) return refuse('EXITPOOL_NO_SUCH_TOKEN', 'no such token');
      if (tokens[i]!.source === 'config') return refuse('EXITPOOL_TOKEN_NOT_REVOCABLE', 'PROXY_TOKEN cannot be revoked');
      tokens.splice(i, 1);
      return null;
    },
  };
}
