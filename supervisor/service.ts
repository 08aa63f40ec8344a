import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { instanceControlPort, instanceSocksPort, type Config, encodeWorkerConfig, WORKER_CONFIG_ENV } from '../shared/config/index.js';
import { routableFloorFor } from '../shared/config/values.js';
import { errorMessage } from '../shared/errors/error-message.js';
import { logger, type Logger } from '../shared/logger.js';
import { serviceVersion } from '../shared/version.js';
import { LocalSignInLimiter } from '../shared/auth/sign-in-limit.js';
import { FLEET_NODE_ENV } from '../shared/ipc/protocol.js';
import { AuditLog } from './audit/audit-log.js';
import { AuthOperations } from './auth-operations.js';
import { AuthStore, type GeneratedCredentials } from './auth/auth-store.js';
import { WorkerManager } from './cluster/worker-manager.js';
import { ExitAssignments } from './exits/exit-assignments.js';
import type { FleetMember } from './fleet/fleet-member.js';
import { fleetMemberOptions, fleetRedisUrl } from './fleet/fleet-config.js';
import { InstanceHealth } from './health/instance-health.js';
import { PoolMetrics } from './metrics/pool-metrics.js';
import { WorkerLoad } from './metrics/worker-load.js';
import { Pool } from './pool/pool.js';
import { TorPoolInstance } from './pool/tor-pool-instance.js';
import { endLeftoverTors } from './tor/leftover-tor.js';
import { torRootOf } from './tor/instance-options.js';
import { checkTorBinary } from './startup/tor-binary-check.js';
import { prepareDataDirectory } from './data-directory.js';
import { StartupError } from './startup/startup-error.js';
import { DurableState, type EarlyState, type StoredSessions } from './state/durable-state.js';
import { loadStoredSessions, openDurableState, withoutSqliteRefusal } from './state/load-durable-state.js';
import { SqliteStateStore, sqliteAvailable } from './state/sqlite-state-store.js';
import type { StateStore } from './state/state-store.js';
import { partyResolver } from './verdicts/parties.js';
import { attachWorker, flushProxyAccounting, stateSnapshot } from './worker-ipc.js';
import { WorkerPort } from './worker-port.js';
import { controlEventTally } from './tor/control-event-tally.js';

/** The state snapshot for the live stream, and session expiry and statistics, run this often. */
export const TICK_MS = 1000;

export interface ServiceOptions {
  /** Allows a torrc without the private-network markers (production: true; tests and demo: false). */
  allowPublicNetwork: boolean;
  /** Extra environment for tor processes (the testnet's LD_PRELOAD guard). */
  torEnv?: NodeJS.ProcessEnv;
  /** A --defaults-torrc for every instance (the testnet's empty one). */
  defaultsTorrc?: string;
  /** tor warnings this setting expects (the demo's private network), logged at debug. */
  expectedTorWarnings?: readonly RegExp[];
}

/**
 * The supervisor: the credential store, the pool of tor instances with their health and the
 * session table, the worker processes, and the periodic tick. `start()` runs the start-up stages
 * in order (below); `stop()` shuts it all down in order: listeners first (workers), then tor
 * (SIGTERM, grace, SIGKILL), then pending saves.
 */
export class Service {
  private tickTimer: NodeJS.Timeout | null = null;
  private ticking = false;
  private stopping: Promise<void> | null = null;

  private constructor(
    readonly config: Config,
    readonly pool: Pool,
    readonly workers: WorkerManager,
    readonly audit: AuditLog,
    readonly store: AuthStore,
    /** Credentials generated at this start (cleartext, for the demo's printout); null otherwise. */
    readonly generated: GeneratedCredentials,
    readonly log: Logger,
    /** The durable state's writer; null with STATE_STORE=none. */
    readonly durable: DurableState | null,
    /** This node's place among the nodes sharing its Redis; null unless STATE_STORE is a redis:// URL. */
    readonly fleet: FleetMember | null,
  ) {}

  /**
   * The start-up, stage by stage. The order is the rules': DATA_DIR is made private before
   * anything is written there; a node takes its name's lease before it reads its state from
   * Redis; the state is read before anything records (the audit trail and the session table go
   * on from what it held), but its sessions (the bulk of it) are read while the tors bootstrap;
   * the pool is built before the workers (they ask it), which reach back to the workers through a
   * port bound when they are forked; the pool serves once the proxies listen and the stored
   * sessions are back. A stage that fails undoes what the stages before it began.
   */
  static async start(config: Config, options: ServiceOptions): Promise<Service> {
    const log = logger();
    announce(config, log);
    // Before anything is written there: DATA_DIR 0700, its files 0600, or a refusal.
    await prepareDataDirectory(config.dataDir, log);
    log.info('tor found', { version: await checkTorBinary(config.torBinary, options.torEnv) });
    // Before credentials are generated: a start that cannot keep its state must not announce them.
    if (config.stateStore === 'sqlite' && !sqliteAvailable()) throw withoutSqliteRefusal();
    const credentials = await openCredentials(config, log);
    const fleet = await joinFleet(config, log);
    const state = await loadState(config, fleet, log);
    // Before any instance rewrites its torrc (the old one names the old owner) or starts a tor
    // where a killed supervisor's may still hold the data directory (supervisor/tor/README.md).
    await endLeftoverTors(torRootOf(config.dataDir), process.pid, log);
    const workerPort = new WorkerPort(log);
    const core = assemblePool(config, options, state, fleet, credentials.store, workerPort, log);
    const load = new WorkerLoad();
    const metrics = poolMetrics(config, core, fleet, workerPort, load);
    const workers: WorkerManager = new WorkerManager({
      exec: path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'workers', 'main.js'),
      specs: [
        { role: 'api', count: 1 },
        { role: 'proxy', count: config.proxyWorkers },
      ],
      env: { [WORKER_CONFIG_ENV]: encodeWorkerConfig(config), ...(fleet ? { [FLEET_NODE_ENV]: fleet.node } : {}) },
      log,
      attach: (h) =>
        attachWorker(h, {
          pool: core.pool,
          exits: core.exits,
          fleet,
          load,
          audit: core.audit,
          metrics,
          store: credentials.store,
          auth: () => auth,
          signInLimiter: credentials.signInLimiter,
          // A listener is up while at least one proxy worker is (they share the sockets).
          proxyWorkersListening: () => workers.handles('proxy').length,
          flushAccounting: () => flushProxyAccounting(workers, log),
          log,
        }),
    });
    workerPort.bind(workers);
    const auth = new AuthOperations(credentials.store, workers, core.audit, log);
    const undoState = async (): Promise<void> => {
      await state?.sessions.catch(() => null);
      await core.durable?.close();
      await fleet?.leave();
    };
    if (fleet) await shareWithFleet(fleet, credentials.store, auth, core, log, undoState);
    if (fleet) pushHopKeys(fleet, workers, log);
    wireWorkerNotices(core, workers, log);
    // The tors bootstrap, and the workers fork, while the stored sessions are still being read.
    core.pool.start();
    try {
      await workers.start();
      if (state && core.durable) await core.durable.restoreSessions(await state.sessions, (ids) => core.pool.holdRestoredSessions(ids));
    } catch (e) {
      log.debug('the start failed; stopping what started', { error: errorMessage(e) });
      await workers.stop(0);
      core.pool.beginShutdown();
      await state?.sessions.catch(() => null);
      await core.durable?.close();
      await core.pool.stop();
      await fleet?.leave();
      throw e;
    }
    // Until now placement() was empty: no connection could start a session over a stored one.
    core.pool.listenersUp();
    const service = new Service(config, core.pool, workers, core.audit, credentials.store, credentials.generated, log, core.durable, fleet);
    service.tickTimer = setInterval(() => service.tick(), TICK_MS);
    // Only a start that succeeded keeps (and shows) the credentials it generated.
    await credentials.store.commitGenerated();
    log.info('API and dashboard listening', { url: `http://${config.bindHost}:${config.apiPort}/` });
    return service;
  }

  /**
   * Expiry and rebalancing read `active` and `last_seen`: the workers' pending accounting (with
   * the connections they routed from leases) comes in first. A tick still waiting skips the next.
   */
  private tick(): void {
    if (this.ticking) return;
    this.ticking = true;
    void flushProxyAccounting(this.workers, this.log).finally(() => {
      this.ticking = false;
      if (this.stopping) return;
      this.pool.tick();
      this.workers.broadcast('state', stateSnapshot(this.pool), 'api');
    });
  }

  stop(): Promise<void> {
    if (!this.stopping) {
      this.stopping = (async () => {
        this.log.info('shutting down');
        if (this.tickTimer) clearInterval(this.tickTimer);
        // Order: no remediation from here on; proxies stop accepting and drain within the grace
        // (what is cut then is not scored); only then tor stops.
        this.pool.beginShutdown();
        await this.workers.stop(this.config.shutdownGraceMs);
        // The workers' last accounting is in: the state is written before tor stops (a stopping
        // instance must not look like one whose sessions should move).
        await this.durable?.close();
        await this.pool.stop();
        // After tor stopped: the other nodes may take its exits from here on.
        await this.fleet?.leave();
        await this.store.idle();
        this.log.info('stopped');
      })();
    }
    return this.stopping;
  }
}

// ---- the start-up stages, in the order Service.start runs them ----

function announce(config: Config, log: Logger): void {
  log.info('exitpool starting', {
    version: serviceVersion(),
    instances: config.poolSize,
    socks: `${config.bindHost}:${config.socksPort}`,
    http: `${config.bindHost}:${config.httpPort}`,
    api: `${config.bindHost}:${config.apiPort}`,
    dataDir: config.dataDir,
  });
  if (config.authDisabled) log.warn('AUTH_DISABLED is on: the proxies and the API accept anyone');
}

interface Credentials {
  store: AuthStore;
  generated: GeneratedCredentials;
  /** Here, not in the API worker, so a restart of that worker keeps the counts. */
  signInLimiter: LocalSignInLimiter;
}

/** Credentials generated now are kept (and shown) only once the start succeeded (AuthStore.commitGenerated). */
async function openCredentials(config: Config, log: Logger): Promise<Credentials> {
  const { store, generated } = await AuthStore.open({ config, log });
  return { store, generated, signInLimiter: new LocalSignInLimiter(config.loginRateLimit) };
}

/**
 * On a shared Redis the node's name is leased first: two processes under one name would write
 * over each other's state (supervisor/fleet). The Redis modules (ioredis, about 10 MiB of a
 * process's memory) load only for a node that uses Redis.
 */
async function joinFleet(config: Config, log: Logger): Promise<FleetMember | null> {
  const url = fleetRedisUrl(config);
  if (url === null) return null;
  const { FleetMember } = await import('./fleet/fleet-member.js');
  return FleetMember.join(fleetMemberOptions(config, url, log));
}

interface LoadedState {
  store: StateStore;
  /** Everything but the sessions: what the pool needs before its first tor starts. */
  early: EarlyState;
  /** The sessions, read and checked while the tors bootstrap (a rejection is caught where it is awaited). */
  sessions: Promise<StoredSessions>;
}

/**
 * Read before anything records: the audit trail and the session table go on from what it held.
 * The sessions (100,000 of them take seconds) are only started here: the start does not wait on
 * them until the pool is about to serve.
 */
async function loadState(config: Config, fleet: FleetMember | null, log: Logger): Promise<LoadedState | null> {
  const url = fleetRedisUrl(config);
  const store: StateStore | null =
    url !== null
      ? new (await import('./state/redis-state-store.js')).RedisStateStore(url, config.nodeName)
      : config.stateStore === 'sqlite'
        ? new SqliteStateStore(config.dataDir)
        : null;
  if (!store) return null;
  try {
    const early = await openDurableState(store, log);
    const sessions = loadStoredSessions(store, log, config.maxSessions);
    // Awaited later (restoreSessions, or the undoing of a failed start): never an unhandled rejection meanwhile.
    sessions.catch(() => undefined);
    return { store, early, sessions };
  } catch (error) {
    await fleet?.leave();
    throw error;
  }
}

/** The pool and what it is built from; the durable state writes behind it from here on. */
interface PoolCore {
  audit: AuditLog;
  /** PIN_EXIT_RELAY: the supervisor assigns each instance its exit (supervisor/exits/README.md). */
  exits: ExitAssignments | undefined;
  pool: Pool;
  durable: DurableState | null;
}

function assemblePool(config: Config, options: ServiceOptions, state: LoadedState | null, fleet: FleetMember | null, store: AuthStore, workers: WorkerPort, log: Logger): PoolCore {
  const audit = new AuditLog();
  const exits = config.pinExitRelay
    ? new ExitAssignments({
        unit: config.exitDistinct,
        banTtlMs: config.exitBanTtlMs,
        exitNodes: config.torExitNodes,
        strictNodes: config.torStrictNodes,
        audit,
        log: log.child({ component: 'exits' }),
        egress: {
          urls: config.egressProbeUrls,
          ttlMs: config.egressProbeTtlMs,
          timeoutMs: config.egressProbeTimeoutMs,
          exitList: config.exitList,
          fetch: (fetch) => workers.fetchThroughInstance(fetch),
        },
      })
    : undefined;
  exits?.start();
  const restoredHealth = state?.early.health;
  const pool = new Pool({
    config,
    waitForListeners: true,
    audit,
    log,
    sendInvalidation: (invalidation) => workers.invalidateRouteLeases(invalidation),
    ...(exits ? { exits } : {}),
    ...(fleet ? { fleet: fleet.sessions, budgets: fleet.budgets.counterFor } : {}),
    probeDestination: (probe) => workers.probeDestination(probe),
    partyOf: partyResolver((id) => store.ownerOf(id)),
    createInstance: (id) => torPoolInstance(config, options, id, exits, log),
    createHealth: (id, instance) => {
      const health = new InstanceHealth({
        id,
        config,
        log: log.child({ instance: id }),
        actions: {
          newCircuit: () => instance.newCircuit(),
          wipeRestart: () => instance.restart(true),
          restart: () => instance.restart(false),
          waitUntilReady: (timeoutMs) => instance.whenReady(timeoutMs),
        },
      });
      // Only the first time an id is created: a later instance with the same id (a resize) is new.
      const kept = restoredHealth?.get(id);
      if (kept) {
        restoredHealth?.delete(id);
        health.restore(kept);
      }
      return health;
    },
  });
  const durable = state
    ? DurableState.resume(
        state.store,
        state.early,
        { sessions: pool.sessions, exitOf: (id) => pool.views.instanceExit(id), exits, health: () => pool.views.persistableHealth(), audit, stats: pool.stats },
        { poolSize: config.poolSize },
        log,
      )
    : null;
  return { audit, exits, pool, durable };
}

function torPoolInstance(config: Config, options: ServiceOptions, id: number, exits: ExitAssignments | undefined, log: Logger): TorPoolInstance {
  return new TorPoolInstance(
    {
      index: id,
      dataDir: config.dataDir,
      socksPort: instanceSocksPort(config, id),
      controlPort: instanceControlPort(config, id),
      torBinary: config.torBinary,
      conflux: config.torConflux,
      maxCircuitDirtinessSecs: Math.round(config.torMaxCircuitDirtinessMs / 1000),
      exitNodes: config.torExitNodes,
      ...(config.torExitNodes.length > 0 ? { strictNodes: config.torStrictNodes } : {}),
      extraTorrcLines: config.torExtraConfig,
      pinExitRelay: config.pinExitRelay,
      allowPublicNetwork: options.allowPublicNetwork,
      stallTimeoutMs: config.bootstrapStallTimeoutMs,
      ...(options.torEnv ? { env: options.torEnv } : {}),
      ...(options.defaultsTorrc ? { defaultsTorrc: options.defaultsTorrc } : {}),
      ...(options.expectedTorWarnings ? { expectedWarnings: options.expectedTorWarnings } : {}),
      log: log.child({ instance: id }),
    },
    exits,
  );
}

function poolMetrics(config: Config, core: PoolCore, fleet: FleetMember | null, workers: WorkerPort, load: WorkerLoad): PoolMetrics {
  const { pool, exits } = core;
  const metrics = new PoolMetrics({
    instanceViews: () => pool.views.instanceViews(),
    lifetime: (id) => pool.views.healthLifetime(id),
    quarantineScore: () => config.quarantineFailures,
    totals: () => pool.views.totalsNow(),
    sessionCount: () => pool.sessions.size,
    sessionsByCountry: () => pool.views.sessionsByCountry(),
    controlEvents: () => controlEventTally.snapshot(),
    routableCount: () => pool.placement().routable.length,
    exitCounts: () =>
      exits
        ? {
            inUse: exits.assignedCount(),
            banned: exits.bans.list(Date.now()).length,
            eligible: exits.eligibleCount(),
            catalog: exits.catalog.size,
            bansMade: exits.bans.made,
            down: exits.downs.counts(Date.now()),
            deathsFound: exits.downs.found,
            egressProbes: exits.egressStats(),
          }
        : null,
    minRoutable: () => routableFloorFor(config.minRoutable, pool.instanceIds().length),
    ...(core.durable ? { stateWriteFailures: () => core.durable?.counters.failures ?? 0 } : {}),
    ...(fleet ? { fleet: () => ({ nodes: fleet.view().nodes.length, redisReachable: fleet.redisReachable }) } : {}),
    workerRestarts: () => workers.restarts,
    workers: () =>
      workers.handles().flatMap((h) => {
        const pid = h.worker.process.pid;
        return pid === undefined ? [] : [{ role: h.role, slot: h.slot, pid, connections: load.connectionsOf(h.slot) }];
      }),
    connectionLimitPerWorker: config.maxConnectionsPerWorker,
    ...(fleet ? { node: fleet.node } : {}),
  });
  pool.on('destination-fault', () => metrics.failuresBlamedOnDestination.inc());
  pool.on('failure-reported', (kind, scored) => metrics.failureReported(kind, scored));
  pool.on('quarantined', (_id, cause) => metrics.quarantined(cause));
  pool.on('country-refused', (countries, reason) => metrics.countryRefused(countries, reason));
  return metrics;
}

/**
 * A node's tokens are the fleet's (issued on any node, revoked everywhere, a revoked one never
 * back), and its pool is: sessions' ownership, its summary, its exits' leases, its standing in
 * the audit trail (FleetMember.attachPool).
 */
async function shareWithFleet(fleet: FleetMember, store: AuthStore, auth: AuthOperations, core: PoolCore, log: Logger, undo: () => Promise<void>): Promise<void> {
  auth.shared = fleet.tokens;
  const push = (snapshots: ReturnType<AuthStore['replaceIssued']>): void => {
    if (snapshots) auth.push(snapshots).catch((e: unknown) => log.error('a worker did not take the fleet’s tokens', { error: errorMessage(e) }));
  };
  try {
    await fleet.shareTokens({
      issued: () => store.issuedTokens(),
      revokedIds: () => store.revokedIds(),
      replace: (tokens) => push(store.replaceIssued(tokens)),
      rememberRevoked: (ids) => push(store.rememberRevoked(ids)),
    });
  } catch (e) {
    await undo();
    throw new StartupError('STATE_STORE', `the fleet's tokens could not be read from Redis: ${errorMessage(e)}`);
  }
  await fleet.attachPool(core.pool.fleetPort, core.exits, core.audit);
}

/** Each rotation of this node's hop keys reaches its proxy workers (a worker forked later asks for them: hop.keys). */
function pushHopKeys(fleet: FleetMember, workers: WorkerManager, log: Logger): void {
  fleet.hopKeys.onChange((snapshot) => {
    for (const h of workers.handles('proxy')) {
      h.endpoint.request('hop.keys.update', snapshot).catch((e: unknown) => log.warn('a proxy worker did not take the new hop keys', { error: errorMessage(e) }));
    }
  });
}

/** What the pool and the audit log tell the workers and the log. */
function wireWorkerNotices(core: PoolCore, workers: WorkerManager, log: Logger): void {
  const { pool, audit } = core;
  audit.on('event', (e) => workers.broadcast('event', e, 'api'));
  pool.on('instances-changed', (ids) => workers.broadcast('session-ports', { instances: ids }, 'proxy'));
  pool.on('instance-down', (id) => workers.broadcast('instance-down', { instance: id }, 'proxy'));
  pool.on('serving', (ready) => log.info('serving', { ready, socks: pool.views.summary().socks_port, http: pool.views.summary().http_port }));
  pool.on('ready-count', (ready) => log.info('instance bootstrapped', { ready, size: pool.instanceIds().length }));
}

/**
 * Set to 1 by the test suite and on development machines: every instance torrc must then carry
 * the private-network markers (TestingTorNetwork, loopback DirAuthority lines), so a mistake
 * can never start a tor that joins the public network.
 */
export const PRIVATE_NETWORK_ONLY_ENV = 'EXITPOOL_PRIVATE_NETWORK_ONLY';

/** `exitpool serve`: runs until SIGTERM or SIGINT, then shuts down gracefully. */
export async function runService(config: Config): Promise<number> {
  const service = await Service.start(config, { allowPublicNetwork: process.env[PRIVATE_NETWORK_ONLY_ENV] !== '1' });
  await new Promise<void>((resolve) => {
    process.once('SIGTERM', () => resolve());
    process.once('SIGINT', () => resolve());
  });
  service.log.info('stopping: proxies drain open connections', { grace: `${config.shutdownGraceMs} ms`, setting: 'SHUTDOWN_GRACE' });
  await service.stop();
  return 0;
}
