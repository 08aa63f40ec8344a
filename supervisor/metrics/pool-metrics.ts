import client from 'prom-client';
import type { InstanceView } from '../../shared/api/views.js';
import type { WorkerRole } from '../../shared/ipc/protocol.js';
import { readProcessStats, type ProcessStats } from './process-stats.js';

/** The exit catalog's figures at a scrape (ExitAssignments). */
export interface ExitCounts {
  inUse: number;
  banned: number;
  eligible: number;
  catalog: number;
  bansMade?: number;
  /** Relays found dead (EXIT_DOWN_HOLD_MS), and those eligible again but on probation. */
  down?: { down: number; probation: number };
  /** Deaths found since the start, a relay dead again counting again. */
  deathsFound?: number;
  /** Egress probes since the start, and how many failed. */
  egressProbes?: { probes: number; failed: number };
}

const NO_EXITS: ExitCounts = Object.freeze({ inUse: 0, banned: 0, eligible: 0, catalog: 0 });

export interface MetricsSource {
  instanceViews(): InstanceView[];
  lifetime(id: number): { transport: number; client: number; byKind: Record<string, number>; remediations: number } | null;
  quarantineScore(): number;
  totals(): { requests: number; failures: number; bytesUp: number; bytesDown: number };
  sessionCount(): number;
  routableCount(): number;
  /** The exit catalog's figures; null when exits are not assigned (PIN_EXIT_RELAY off). `bansMade`: bans made here since start. */
  exitCounts?(): ExitCounts | null;
  /** MIN_ROUTABLE for the pool's size now: client reports never quarantine below it. */
  minRoutable?(): number;
  /** Writes of the durable state that failed since start; absent with STATE_STORE=none. */
  stateWriteFailures?(): number;
  /** On a node of a fleet: the live nodes it sees, and whether its last renewal reached Redis. */
  fleet?(): { nodes: number; redisReachable: boolean };
  /** Sessions per country their username asked for. */
  sessionsByCountry?(): Map<string, number>;
  /** Control-port events received from the instances' tors since start, by event name. */
  controlEvents?(): ReadonlyMap<string, number>;
  workerRestarts(): number;
  /** The workers running now. */
  workers(): WorkerSample[];
  /** MAX_CONNECTIONS_PER_WORKER. */
  connectionLimitPerWorker: number;
  /** NODE_NAME on a node of a fleet (STATE_STORE=redis://…): every sample carries it as `node`, so one Prometheus can scrape every pod. */
  node?: string;
}

/**
 * prom-client's default metrics (process_*, nodejs_*) were exported under the prefix
 * `pool_process_` until this release, which doubled it (`pool_process_process_cpu_seconds_total`).
 * They are `pool_` + their own name now; the old names are exported too, with the same values,
 * for one release (CHANGELOG, docs/operations.md).
 */
export const DEPRECATED_DEFAULT_METRICS_PREFIX = 'pool_process_';
export const DEFAULT_METRICS_PREFIX = 'pool_';

export interface WorkerSample {
  role: WorkerRole;
  slot: number;
  pid: number;
  /** Proxy workers: client connections held, as last reported; null when not reported yet. */
  connections: number | null;
}

/**
 * The one metrics registry, in the supervisor: it owns all state, so /metrics is a single
 * consistent view. Pool figures are read at scrape time; latencies are observed as they
 * arrive in the workers' accounting batches.
 */
export class PoolMetrics {
  readonly registry = new client.Registry();
  /** prom-client's default metrics, apart, so that text() can also give them under their deprecated names. */
  private readonly defaults = new client.Registry();
  readonly dialLatency: client.Histogram;
  readonly ipcRoundTrip: client.Histogram;
  readonly routeLeaseHits: client.Counter;
  readonly failuresBlamedOnDestination: client.Counter;
  private readonly countryRefusals: client.Counter;
  private readonly quarantines: client.Counter;
  private readonly failureReports: client.Counter;
  readonly connectionsRefused: client.Counter;
  readonly connectionsEvicted: client.Counter;
  /** The workers and their /proc figures, read once per scrape (text()) for every worker metric. */
  private workerSamples: Array<{ worker: WorkerSample; labels: { role: string; slot: string }; stats: ProcessStats | null }> = [];
  /** The exit catalog's figures, read once per scrape (text()) for the nine exit metrics. */
  private exitSample: ExitCounts = NO_EXITS;

  constructor(private readonly source: MetricsSource) {
    const r = this.registry;
    if (source.node !== undefined) {
      r.setDefaultLabels({ node: source.node });
      this.defaults.setDefaultLabels({ node: source.node });
    }
    client.collectDefaultMetrics({ register: this.defaults, prefix: DEFAULT_METRICS_PREFIX });
    const gauge = (name: string, help: string, labelNames: string[], collect: (g: client.Gauge) => void): void => {
      new client.Gauge({ name, help, labelNames, registers: [r], collect() { this.reset(); collect(this); } });
    };
    const counter = (name: string, help: string, labelNames: string[], collect: (c: client.Counter) => void): void => {
      new client.Counter({ name, help, labelNames, registers: [r], collect() { this.reset(); collect(this); } });
    };
    gauge('pool_instances_routable', 'Instances that take traffic now', [], (g) => g.set(source.routableCount()));
    gauge('pool_instances_total', 'Instances in the pool', [], (g) => g.set(source.instanceViews().length));
    gauge('pool_instances_ready', 'Bootstrapped instances', [], (g) => g.set(source.instanceViews().filter((i) => i.ready).length));
    gauge('pool_instance_bootstrap_ratio', 'Bootstrap progress per instance, 0 to 1', ['instance'], (g) => {
      for (const i of source.instanceViews()) g.set({ instance: String(i.id) }, i.bootstrap / 100);
    });
    gauge('pool_instance_bootstrap_percent', 'Deprecated (removed in the next release): pool_instance_bootstrap_ratio, which is 0 to 1', ['instance'], (g) => {
      for (const i of source.instanceViews()) g.set({ instance: String(i.id) }, i.bootstrap);
    });
    if (source.minRoutable) {
      const minRoutable = source.minRoutable.bind(source);
      gauge('pool_min_routable', 'MIN_ROUTABLE as a number of instances for the pool size now: client reports never quarantine below it', [], (g) => g.set(minRoutable()));
    }
    gauge('pool_instance_failure_score', 'Weighted failures in the window per instance', ['instance'], (g) => {
      for (const i of source.instanceViews()) g.set({ instance: String(i.id) }, i.health.failure_score);
    });
    gauge('pool_instance_state', 'Health state per instance (1 for the current state)', ['instance', 'state'], (g) => {
      for (const i of source.instanceViews()) g.set({ instance: String(i.id), state: i.health.state }, 1);
    });
    gauge('pool_instance_sessions', 'Sessions pinned per instance', ['instance'], (g) => {
      for (const i of source.instanceViews()) g.set({ instance: String(i.id) }, i.sessions);
    });
    gauge('pool_quarantine_score', 'Failure score that quarantines an instance', [], (g) => g.set(source.quarantineScore()));
    gauge('pool_sessions', 'Sessions in the table', [], (g) => g.set(source.sessionCount()));
    gauge('pool_sessions_by_country', 'Sessions whose username asked for a country, per country asked for (a session naming several counts under each)', ['country'], (g) => {
      for (const [country, n] of source.sessionsByCountry?.() ?? []) g.set({ country }, n);
    });
    const exits = (): ExitCounts => this.exitSample;
    gauge('pool_exits_in_use', 'Distinct exit relays assigned to instances', [], (g) => g.set(exits().inUse));
    gauge('pool_exits_banned', 'Exit relays banned (EXIT_BAN_TTL) after a quarantine, or unreachable', [], (g) => g.set(exits().banned));
    gauge('pool_exits_eligible', 'Exit relays an instance could be assigned now (usable, not banned, within TOR_EXIT_NODES when strict)', [], (g) => g.set(exits().eligible));
    gauge('pool_exits_catalog', 'Usable exit relays in the consensus', [], (g) => g.set(exits().catalog));
    gauge('pool_exits_down', 'Exit relays the pool found dead, by state: down (assigned to no instance, EXIT_DOWN_HOLD_MS) or probation (eligible again, watched)', ['state'], (g) => {
      const down = exits().down ?? { down: 0, probation: 0 };
      g.set({ state: 'down' }, down.down);
      g.set({ state: 'probation' }, down.probation);
    });
    counter('pool_exit_deaths_total', "Exit relays found dead by this node's instances (a relay dead again within its probation counts again)", [], (c) => c.inc(exits().deathsFound ?? 0));
    counter('pool_egress_probes_total', 'Egress probes through exits (EGRESS_PROBE_URLS) that ran, by outcome: ok, or failed (no address from any echo service through the exit within EGRESS_PROBE_TIMEOUT)', ['outcome'], (c) => {
      const probes = exits().egressProbes ?? { probes: 0, failed: 0 };
      c.inc({ outcome: 'ok' }, probes.probes - probes.failed);
      c.inc({ outcome: 'failed' }, probes.failed);
    });
    counter('pool_exit_bans_total', 'Exit bans made on this node (a quarantine for captcha, blocked or transport failures, an unreachable exit; a ban extended counts again; bans from other nodes of a fleet do not)', [], (c) =>
      c.inc(exits().bansMade ?? 0),
    );
    if (source.stateWriteFailures) {
      const failures = source.stateWriteFailures.bind(source);
      counter('pool_state_write_failures_total', 'Writes of the durable state (STATE_STORE) that failed; the service serves from memory and retries every flush', [], (c) => c.inc(failures()));
    }
    if (source.fleet) {
      const fleet = source.fleet.bind(source);
      gauge('pool_fleet_nodes', 'Live nodes of the fleet this node sees (itself included), as of its last renewal', [], (g) => g.set(fleet().nodes));
      gauge('pool_redis_reachable', '1 when the last renewal of this node reached Redis (STATE_STORE), 0 when it failed', [], (g) => g.set(fleet().redisReachable ? 1 : 0));
    }
    counter('pool_instance_failures_total', 'Failures per instance by source (transport or client)', ['instance', 'source'], (c) => {
      for (const i of source.instanceViews()) {
        const l = source.lifetime(i.id);
        if (!l) continue;
        c.inc({ instance: String(i.id), source: 'transport' }, l.transport);
        c.inc({ instance: String(i.id), source: 'client' }, l.client);
      }
    });
    counter('pool_instance_failure_kinds_total', 'Failures per instance by kind', ['instance', 'kind'], (c) => {
      for (const i of source.instanceViews()) {
        const l = source.lifetime(i.id);
        if (!l) continue;
        for (const [kind, n] of Object.entries(l.byKind)) c.inc({ instance: String(i.id), kind }, n);
      }
    });
    counter('pool_instance_remediations_total', 'Remediations per instance', ['instance'], (c) => {
      for (const i of source.instanceViews()) {
        const l = source.lifetime(i.id);
        if (l) c.inc({ instance: String(i.id) }, l.remediations);
      }
    });
    counter('pool_requests_total', 'Proxied connections and requests', [], (c) => c.inc(source.totals().requests));
    counter('pool_request_failures_total', 'Proxied connections and requests that failed', [], (c) => c.inc(source.totals().failures));
    counter('pool_bytes_total', 'Bytes relayed by direction', ['direction'], (c) => {
      const t = source.totals();
      c.inc({ direction: 'up' }, t.bytesUp);
      c.inc({ direction: 'down' }, t.bytesDown);
    });
    if (source.controlEvents) {
      const events = source.controlEvents.bind(source);
      counter('pool_tor_control_events_total', "Events the instances' tors sent on their control connections, by event (CIRC, STREAM, STATUS_CLIENT)", ['event'], (c) => {
        for (const [event, n] of events()) c.inc({ event }, n);
      });
    }
    counter('pool_worker_restarts_total', 'Worker processes re-forked after dying', [], (c) => c.inc(source.workerRestarts()));
    // Worker processes (the supervisor's own are pool_process_*), from the scrape's sample.
    gauge('pool_worker_resident_memory_bytes', 'Resident memory per worker process', ['role', 'slot'], (g) => {
      for (const w of this.workerSamples) if (w.stats) g.set(w.labels, w.stats.residentBytes);
    });
    gauge('pool_worker_open_fds', 'Open file descriptors per worker process', ['role', 'slot'], (g) => {
      for (const w of this.workerSamples) if (w.stats) g.set(w.labels, w.stats.openFds);
    });
    counter('pool_worker_cpu_seconds_total', 'CPU time per worker process (starts again at 0 when a worker is re-forked)', ['role', 'slot'], (c) => {
      for (const w of this.workerSamples) if (w.stats) c.inc(w.labels, w.stats.cpuSeconds);
    });
    gauge('pool_proxy_worker_connections', 'Client connections held per proxy worker', ['slot'], (g) => {
      for (const { worker } of this.workerSamples) if (worker.role === 'proxy' && worker.connections !== null) g.set({ slot: String(worker.slot) }, worker.connections);
    });
    gauge('pool_proxy_worker_connection_limit', 'MAX_CONNECTIONS_PER_WORKER: connections one proxy worker holds before refusing', [], (g) =>
      g.set(source.connectionLimitPerWorker),
    );
    this.dialLatency = new client.Histogram({
      name: 'pool_dial_latency_seconds',
      help: 'Time from routing to the instance accepting the connection',
      buckets: [0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [r],
    });
    this.connectionsRefused = new client.Counter({
      name: 'pool_proxy_connections_refused_total',
      help: 'Client connections refused because a proxy worker held MAX_CONNECTIONS_PER_WORKER already',
      registers: [r],
    });
    this.connectionsEvicted = new client.Counter({
      name: 'pool_proxy_connections_evicted_total',
      help: 'Unauthenticated client connections a proxy worker closed to make room for new ones (MAX_UNAUTHENTICATED_PER_WORKER, MAX_CONNECTIONS_PER_WORKER)',
      registers: [r],
    });
    this.ipcRoundTrip = new client.Histogram({
      name: 'pool_ipc_roundtrip_seconds',
      help: 'Route request round trip between a proxy worker and the supervisor',
      buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25],
      registers: [r],
    });
    this.routeLeaseHits = new client.Counter({
      name: 'pool_route_lease_hits_total',
      help: 'Connections a proxy worker routed with a cached route lease, without a round trip to the supervisor',
      registers: [r],
    });
    this.countryRefusals = new client.Counter({
      name: 'pool_country_refusals_total',
      help: 'Connections refused that asked for countries, per country asked for and reason (no_exit_in_country, country_wait_timeout, no_routable_instance)',
      labelNames: ['country', 'reason'],
      registers: [r],
    });
    this.quarantines = new client.Counter({
      name: 'pool_quarantines_total',
      help: 'Instances quarantined, by cause (score, consecutive, probation, manual)',
      labelNames: ['cause'],
      registers: [r],
    });
    this.failureReports = new client.Counter({
      name: 'pool_failure_reports_total',
      help: 'Failure reports from clients (POST /api/sessions/{key}/failure), by kind and whether they were scored (beyond CLIENT_REPORT_BUDGET they are not)',
      labelNames: ['kind', 'scored'],
      registers: [r],
    });
    this.failuresBlamedOnDestination = new client.Counter({
      name: 'pool_failures_blamed_on_destination_total',
      help: 'Refusals (unresolvable name, refused port) that failed the same way through another exit: counted as failed requests, not held against the exit',
      registers: [r],
    });
  }

  /** A connection asking for `countries` was refused: counted once under each, so a refusal shows for every country it names. */
  countryRefused(countries: readonly string[], reason: string): void {
    for (const country of countries) this.countryRefusals.inc({ country, reason });
  }

  /** An instance was quarantined. */
  quarantined(cause: string): void {
    this.quarantines.inc({ cause });
  }

  /** A client reported a failure; `scored` false beyond its CLIENT_REPORT_BUDGET. */
  failureReported(kind: string, scored: boolean): void {
    this.failureReports.inc({ kind, scored: String(scored) });
  }

  async text(): Promise<{ contentType: string; text: string }> {
    this.exitSample = this.source.exitCounts?.() ?? NO_EXITS;
    this.workerSamples = this.source.workers().map((worker) => ({
      worker,
      labels: { role: worker.role, slot: String(worker.slot) },
      stats: readProcessStats(worker.pid),
    }));
    const defaults = await this.defaults.metrics();
    return { contentType: this.registry.contentType, text: (await this.registry.metrics()) + defaults + underDeprecatedNames(defaults) };
  }
}

/**
 * The default metrics' exposition again under their names before this release (`pool_` became
 * `pool_process_`), each HELP saying what replaces it. The same samples, read once.
 */
export function underDeprecatedNames(exposition: string): string {
  return exposition.replace(/^(# HELP |# TYPE )?pool_(\S*)(.*)$/gm, (_line, comment: string | undefined, rest: string, tail: string) => {
    const name = `${DEPRECATED_DEFAULT_METRICS_PREFIX}${rest}`;
    if (comment === '# HELP ') return `# HELP ${name} Deprecated (removed in the next release): ${DEFAULT_METRICS_PREFIX}${rest}.${tail}`;
    return `${comment ?? ''}${name}${tail}`;
  });
}
