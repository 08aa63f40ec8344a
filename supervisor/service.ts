import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { instanceControlPort, instanceSocksPort, type Config, encodeWorkerConfig, WORKER_CONFIG_ENV } from '../shared/config/index.js';
import { logger, type Logger } from '../shared/logger.js';
import { serviceVersion } from '../shared/version.js';
import { AuditLog } from './audit/audit-log.js';
import { AuthOperations } from './auth-operations.js';
import { LocalSignInLimiter } from '../shared/auth/sign-in-limit.js';
import { AuthStore, type GeneratedCredentials } from './auth/auth-store.js';
import { WorkerManager } from './cluster/worker-manager.js';
import { InstanceHealth } from './health/instance-health.js';
import { PoolMetrics } from './metrics/pool-metrics.js';
import { WorkerLoad } from './metrics/worker-load.js';
import { Pool } from './pool/pool.js';
import { DestinationBlame } from './exits/destination-blame.js';
import { ExitAssignments } from './exits/exit-assignments.js';
import { TorPoolInstance } from './pool/tor-pool-instance.js';
import { checkTorBinary } from './startup/tor-binary-check.js';
import { prepareDataDirectory } from './startup/data-directory.js';
import type { FleetMember } from './fleet/fleet-member.js';
import { StartupError } from './startup/startup-error.js';
import { DurableState } from './state/durable-state.js';
import { loadStoredSessions, openDurableState } from './state/load-durable-state.js';
import { SqliteStateStore } from './state/sqlite-state-store.js';
import { FORWARD_DIGEST_ENV } from '../shared/ipc/protocol.js';
import { attachWorker, flushProxyAccounting, invalidateRouteLeases, probeDestinationThroughWorker, stateSnapshot } from './worker-ipc.js';

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
 * session table, the worker processes, and the periodic tick. `stop()` shuts it all down in
 * order: listeners first (workers), then tor (SIGTERM, grace, SIGKILL), then pending saves.
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

  static async start(config: Config, options: ServiceOptions): Promise<Service> {
    const log = logger();
    log.info('exitpool starting', {
      version: serviceVersion(),
      instances: config.poolSize,
      socks: `${config.bindHost}:${config.socksPort}`,
      http: `${config.bindHost}:${config.httpPort}`,
      api: `${config.bindHost}:${config.apiPort}`,
      dataDir: config.dataDir,
    });
    if (config.authDisabled) log.warn('AUTH_DISABLED is on: the proxies and the API accept anyone');
    // Before anything is written there: DATA_DIR 0700, its files 0600, or a refusal.
    await prepareDataDirectory(config.dataDir, log);

    log.info('tor found', { version: await checkTorBinary(config.torBinary, options.torEnv) });
    const { store, generated } = await AuthStore.open({ config, log });
    // Here, not in the API worker, so a restart of that worker keeps the counts.
    const signInLimiter = new LocalSignInLimiter(config.loginRateLimit);
    if (generated.adminPassword) {
      log.warn('generated dashboard credentials (shown once; stored as a digest)', { user: config.adminUser, password: generated.adminPassword });
    }
    if (generated.proxyToken) {
      log.warn('generated proxy token (shown once; stored as a digest)', { token: generated.proxyToken.secret, id: generated.proxyToken.id });
    }

    // On a shared Redis the node's name is leased first: two processes under one name would
    // write over each other's state (supervisor/fleet).
    const redisUrl = config.stateStore === 'none' || config.stateStore === 'sqlite' ? null : config.stateStore;
    // The Redis modules (ioredis, about 10 MiB of a process's memory) load only for a node that uses Redis.
    const fleet =
      redisUrl === null
        ? null
        : await (await import('./fleet/fleet-member.js')).FleetMember.join({
            url: redisUrl,
            node: config.nodeName,
            leaseMs: config.nodeLeaseMs,
            address: { host: advertisedHost(config), port: config.socksPort, apiPort: config.apiPort },
            sessionLifetimeMs: Math.max(config.sessionTtlMs, config.sessionTtlMaxMs),
            log: log.child({ component: 'fleet' }),
          });
    // Read before anything records: the audit trail and the session table go on from what it held.
    const durableStore =
      redisUrl !== null
        ? new (await import('./state/redis-state-store.js')).RedisStateStore(redisUrl, config.nodeName)
        : config.stateStore === 'sqlite'
          ? new SqliteStateStore(config.dataDir)
          : null;
    let restored;
    let storedSessions;
    try {
      restored = durableStore ? await openDurableState(durableStore, log) : null;
      storedSessions = durableStore ? await loadStoredSessions(durableStore, log, config.maxSessions) : null;
    } catch (error) {
      await fleet?.leave();
      throw error;
    }

    const audit = new AuditLog();
    // PIN_EXIT_RELAY: the supervisor assigns each instance its exit (supervisor/exits/README.md).
    const exits = config.pinExitRelay
      ? new ExitAssignments({
          unit: config.exitDistinct,
          banTtlMs: config.exitBanTtlMs,
          exitNodes: config.torExitNodes,
          strictNodes: config.torStrictNodes,
          audit,
          log: log.child({ component: 'exits' }),
        })
      : undefined;
    exits?.start();
    // A destination refusal is checked through another exit before it counts against this one.
    const blame = new DestinationBlame(async ({ host, port }, except) => {
      const socks = pool.probeRoute(except);
      return socks === null ? null : probeDestinationThroughWorker(workers, { socks, host, port }, log);
    });
    const pool: Pool = new Pool({
      config,
      waitForListeners: true,
      audit,
      log,
      sendInvalidation: (invalidation) => invalidateRouteLeases(workers, invalidation, log),
      ...(exits ? { exits } : {}),
      ...(fleet ? { fleet: fleet.sessions } : {}),
      blame,
      onDestinationFault: () => metrics.failuresBlamedOnDestination.inc(),
      onCountryRefusal: (countries, reason) => metrics.countryRefused(countries, reason),
      createInstance: (id) =>
        new TorPoolInstance(
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
        ),
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
          onQuarantine: ({ cause }) => {
            if (cause !== 'manual') pool.quarantined(id, cause);
          },
          onAudit: (e) => audit.record({ type: e.type, instance: id, message: e.message, details: e.details }),
        });
        // Only the first time an id is created: a later instance with the same id (a resize) is new.
        const kept = restored?.health.get(id);
        if (kept) {
          restored?.health.delete(id);
          health.restore(kept);
        }
        return health;
      },
    });
    const durable =
      durableStore && restored
        ? DurableState.resume(
            durableStore,
            restored,
            { sessions: pool.sessions, exitOf: (id) => pool.instanceExit(id), exits, health: () => pool.persistableHealth(), audit, stats: pool.stats },
            { poolSize: config.poolSize },
            log,
          )
        : null;
    if (durable && storedSessions) await durable.restoreSessions(storedSessions, (ids) => pool.holdRestoredSessions(ids));

    const load = new WorkerLoad();
    const metrics = new PoolMetrics({
      instanceViews: () => pool.instanceViews(),
      lifetime: (id) => pool.healthLifetime(id),
      quarantineScore: () => config.quarantineFailures,
      totals: () => pool.totalsNow(),
      sessionCount: () => pool.sessions.size,
      sessionsByCountry: () => pool.sessionsByCountry(),
      routableCount: () => pool.placement().routable.length,
      exitCounts: () =>
        exits ? { inUse: exits.assignedCount(), banned: exits.bans.list(Date.now()).length, eligible: exits.eligibleCount(), catalog: exits.catalog.size } : null,
      workerRestarts: () => workers.restarts,
      workers: () =>
        workers.handles().flatMap((h) => {
          const pid = h.worker.process.pid;
          return pid === undefined ? [] : [{ role: h.role, slot: h.slot, pid, connections: load.connectionsOf(h.slot) }];
        }),
      connectionLimitPerWorker: config.maxConnectionsPerWorker,
      ...(fleet ? { node: fleet.node } : {}),
    });

    const workers: WorkerManager = new WorkerManager({
      exec: path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'workers', 'main.js'),
      specs: [
        { role: 'api', count: 1 },
        { role: 'proxy', count: config.proxyWorkers },
      ],
      env: { [WORKER_CONFIG_ENV]: encodeWorkerConfig(config), ...(fleet ? { [FORWARD_DIGEST_ENV]: fleet.forwardDigest } : {}) },
      log,
      attach: (h) =>
        attachWorker(h, {
          pool,
          exits,
          fleet,
          load,
          audit,
          metrics,
          store,
          auth: () => auth,
          signInLimiter,
          // A listener is up while at least one proxy worker is (they share the sockets).
          proxyWorkersListening: () => workers.handles('proxy').length,
          flushAccounting: () => flushProxyAccounting(workers, log),
          log,
        }),
    });
    const auth = new AuthOperations(store, workers, audit, log);
    if (fleet) {
      // Tokens issued on any node work on every node; a revocation anywhere is in force everywhere.
      auth.shared = fleet.tokens;
      try {
        await fleet.shareTokens(store.issuedTokens(), (tokens) => {
          const snapshots = store.replaceIssued(tokens);
          if (snapshots) auth.push(snapshots).catch((e: unknown) => log.error('a worker did not take the fleet’s tokens', { error: (e as Error).message }));
        });
      } catch (e) {
        await durable?.close();
        await fleet.leave();
        throw new StartupError('STATE_STORE', `the fleet's tokens could not be read from Redis: ${(e as Error).message}`);
      }
    }

    audit.on('event', (e) => workers.broadcast('event', e, 'api'));
    pool.on('instances-changed', (ids) => workers.broadcast('session-ports', { instances: ids }, 'proxy'));
    pool.on('instance-down', (id) => workers.broadcast('instance-down', { instance: id }, 'proxy'));
    pool.on('serving', (ready) => log.info('serving', { ready, socks: config.socksPort, http: config.httpPort }));
    pool.on('ready-count', (ready) => log.info('instance bootstrapped', { ready, size: pool.instanceIds().length }));

    if (fleet) {
      fleet.trackSessions(
        (since) => pool.sessionKeysUsedSince(since),
        (sessions) => pool.giveUpSessions(sessions),
      );
      fleet.describeSelf(() => ({
        routable: pool.placement().routable.length,
        sessions: pool.sessions.size,
        instances: pool.instanceViews().map((i) => ({
          id: i.id,
          ready: i.ready,
          state: i.health.state,
          exit_ip: i.exit_ip,
          exit_country: i.exit_country,
          exit_fingerprint: i.assigned_exit?.fingerprint ?? '',
          sessions: i.sessions,
          requests: i.totals.requests,
        })),
      }));
      if (exits) await fleet.manageExits(exits);
    }
    pool.start();
    try {
      await workers.start();
    } catch (e) {
      log.debug('workers failed to start; stopping what started', { error: (e as Error).message });
      await workers.stop(0);
      pool.beginShutdown();
      await durable?.close();
      await pool.stop();
      await fleet?.leave();
      throw e;
    }
    pool.listenersUp();
    const service = new Service(config, pool, workers, audit, store, generated, log, durable, fleet);
    service.tickTimer = setInterval(() => service.tick(), TICK_MS);
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

/** NODE_ADDRESS, or BIND_HOST, or (BIND_HOST being a wildcard) the host name: where the other nodes reach this one. */
function advertisedHost(config: Config): string {
  if (config.nodeAddress !== '') return config.nodeAddress;
  return config.bindHost === '0.0.0.0' || config.bindHost === '::' ? os.hostname() : config.bindHost;
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
