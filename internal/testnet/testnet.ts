import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync } from 'node:fs';
import { rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { childLogger, type Logger } from '../../shared/logger.js';
import { errorMessage } from '../../shared/errors/error-message.js';
import { BANDWIDTH_FILE_REFRESH_MS, bandwidthFileContent } from './bandwidth-file.js';
import { countMicrodescriptors, parseConsensus, usabilityProblems, type UsabilityExpectation } from './consensus.js';
import { fetchDirectoryDocument } from './directory-fetch.js';
import { DnsResponder } from './dns-responder.js';
import { trackWorkDir, untrackWorkDir } from './emergency-teardown.js';
import { ShimNotLoadedError, TestnetError, TestnetNotUsableError, TestnetStoppedError, WorkDirInUseError } from './errors.js';
import { exitListFileContent } from './exit-list-file.js';
import { geoip6FileContent, geoipFileContent } from './geoip-file.js';
import { generateAuthorityKeys, generateRelayIdentity, type KeygenTools } from './node-keys.js';
import { reservePortBlock, type PortBlock } from './port-block.js';
import { findRepoRoot } from './repo-root.js';
import { findExecutable } from './required-tools.js';
import { ensureShimBuilt } from './shim-build.js';
import { isShimMapped } from './shim-check.js';
import { isRunOwnerAlive, KEPT_RUN_FILE, liveTorsOfRun, markRunKept, OWNER_FILE, reapRun, reapStaleRuns, terminateProcesses, writeOwnerFile } from './stale-runs.js';
import { DEFAULT_STOP_GRACE_MS, TorProcess } from './tor-process.js';
import {
  AUTHORITY_COUNT,
  DEFAULT_EXIT_COUNTRIES,
  DEFAULT_EXITS,
  DEFAULT_RELAYS,
  planTopology,
  plannedEndpoints,
  portSpan,
  validateTopology,
  type NodePlan,
  type NodeRole,
  type TestnetPlan,
} from './topology.js';
import {
  networkMembershipLines,
  nodeLogFile,
  nodePidFile,
  nodeTorrcLines,
  nodeTorrcPath,
  renderTorrc,
  type AuthorityIdentity,
  type SharedFiles,
} from './torrc.js';
import { WhoamiServer } from './whoami-server.js';

export const DEFAULT_BASE_PORT = 20000;
export const DEFAULT_USABLE_TIMEOUT_MS = 120_000;
const PID_FILE_TIMEOUT_MS = 20_000;
const CONSENSUS_POLL_MS = 1_000;
const DIRECTORY_FETCH_TIMEOUT_MS = 3_000;
/** What clients fetch; checking it (not the full consensus) proves what they will see. */
const CONSENSUS_PATH = '/tor/status-vote/current/consensus-microdesc';
export const TESTNET_ROOT_DIR = '.testnet';
const SHIM_CACHE_DIR = '.shim-cache';

export interface TestnetOptions {
  /** Default: <repo>/.testnet/<run-id>. A given dir must be absent, empty, or an old testnet dir. */
  workDir?: string;
  /** First port of the block (DNS, whoami, then OR/Dir ports). Given: used exactly or fails; default: the first free block from 20000. */
  basePort?: number;
  /** At least 4 (default 4). */
  exits?: number;
  /** Middle relays, which are also the only guards (default 3). */
  relays?: number;
  /** Country codes given to exits in turn (default de, nl, us, se, …). */
  exitCountries?: readonly string[];
  /** Two exits send their traffic from an address in another exit's /24 (EGRESS_ELSEWHERE_EXITS); default false. */
  egressElsewhere?: boolean;
  /** Leave the work dir (keys, logs) on disk after stop(). */
  keepWorkDir?: boolean;
  /** SIGTERM grace per tor in stop() before SIGKILL. */
  stopGraceMs?: number;
  log?: Logger;
}

export interface TestnetExit {
  readonly nickname: string;
  readonly fingerprint: string;
  /** The exit's own loopback address, published in the consensus (its OR address). */
  readonly address: string;
  /** Lower-case code of the published address, as tor's GETINFO ip-to-country answers it. */
  readonly country: string;
  /**
   * The address destinations see as the source of its traffic: `address`, except for the exits
   * that leave from an address in another exit's /24 (EGRESS_ELSEWHERE_EXITS, in a network
   * started with `egressElsewhere`).
   */
  readonly egressAddress: string;
  /** Lower-case code of the egress address (GETINFO ip-to-country/<egressAddress>). */
  readonly egressCountry: string;
  /** Fingerprints of the exits it declares as family (FAMILY_EXITS), empty for the others. */
  readonly family: readonly string[];
}

export interface TestnetNode {
  readonly role: NodeRole;
  readonly nickname: string;
  readonly fingerprint: string;
  readonly address: string;
  readonly orPort: number;
  readonly dirPort: number;
  readonly pid: number;
}

export interface Testnet {
  readonly workDir: string;
  readonly basePort: number;
  /**
   * Everything a client torrc needs to join this network and nothing else (no SocksPort,
   * ControlPort or DataDirectory): TestingTorNetwork 1, UseDefaultFallbackDirs 0, the DirAuthority
   * lines, the custom GeoIP files, PathsNeededToBuildCircuits.
   */
  readonly clientTorrcLines: readonly string[];
  /** Environment for client tors: LD_PRELOAD of the loopback shim (recommended, not required). */
  readonly clientEnvironment: Readonly<Record<string, string>>;
  readonly exits: readonly TestnetExit[];
  readonly nodes: readonly TestnetNode[];
  readonly whoami: WhoamiServer;
  readonly dns: { readonly host: string; readonly port: number };
  readonly geoipFile: string;
  readonly geoip6File: string;
  /** Every exit and the address its traffic leaves from, in the Tor exit list's bulk `exit-addresses` format (EXIT_LIST). */
  readonly exitListFile: string;
  readonly shimLibrary: string;
  /** The tor binary and empty defaults file the network uses (clients should use them too). */
  readonly torBinary: string;
  readonly defaultsTorrc: string;
  /** PIDs of the network's tors (authorities, relays, exits). */
  readonly pids: readonly number[];
  /** Milliseconds from startTestnet() to a usable consensus, once waitUntilUsable() succeeded. */
  readonly usableAfterMs: number | undefined;
  readonly stopped: boolean;
  /**
   * Resolves once every authority serves a consensus listing every relay Running with its flags
   * and every directory cache holds all microdescriptors (so a new client bootstraps at once).
   */
  waitUntilUsable(timeoutMs?: number): Promise<void>;
  /** Stops every tor (SIGTERM, SIGKILL after a grace), the DNS and whoami servers; removes the work dir unless kept. Idempotent. */
  stop(): Promise<void>;
}

interface StartedNode {
  readonly plan: NodePlan;
  readonly fingerprint: string;
  readonly tor: TorProcess;
}

function tryRun(label: string, log: Logger, action: () => void): void {
  try {
    action();
  } catch (err) {
    log.warn(`${label} failed`, { error: errorMessage(err) });
  }
}

class RunningTestnet implements Testnet {
  readonly workDir: string;
  readonly clientEnvironment: Readonly<Record<string, string>>;
  readonly geoipFile: string;
  readonly geoip6File: string;
  readonly exitListFile: string;
  readonly defaultsTorrc: string;
  private readonly log: Logger;
  private readonly startedAt: number;
  private readonly keepWorkDir: boolean;
  private readonly stopGraceMs: number;
  private readonly started: StartedNode[] = [];
  private readonly failures: TestnetError[] = [];
  private block: PortBlock | undefined;
  private dnsServer: DnsResponder | undefined;
  private whoamiServer: WhoamiServer | undefined;
  private refreshTimer: NodeJS.Timeout | undefined;
  private plan: TestnetPlan | undefined;
  private clientLines: readonly string[] = [];
  private usableMs: number | undefined;
  private usablePromise: Promise<void> | undefined;
  private stopPromise: Promise<void> | undefined;

  constructor(
    readonly torBinary: string,
    readonly shimLibrary: string,
    workDir: string,
    options: TestnetOptions,
    log: Logger,
    startedAt: number,
  ) {
    this.workDir = workDir;
    this.log = log;
    this.startedAt = startedAt;
    this.keepWorkDir = options.keepWorkDir ?? false;
    this.stopGraceMs = options.stopGraceMs ?? DEFAULT_STOP_GRACE_MS;
    this.clientEnvironment = { LD_PRELOAD: shimLibrary };
    this.geoipFile = path.join(workDir, 'geoip');
    this.geoip6File = path.join(workDir, 'geoip6');
    this.exitListFile = path.join(workDir, 'exit-addresses');
    this.defaultsTorrc = path.join(workDir, 'torrc-defaults');
  }

  get basePort(): number {
    return this.requirePlan().basePort;
  }

  get clientTorrcLines(): readonly string[] {
    return this.clientLines;
  }

  get exits(): readonly TestnetExit[] {
    return this.started
      .filter((n) => n.plan.role === 'exit')
      .map((n, _i, exits) => ({
        nickname: n.plan.nickname,
        fingerprint: n.fingerprint,
        address: n.plan.address,
        country: n.plan.country ?? '??',
        egressAddress: n.plan.egressAddress,
        egressCountry: n.plan.egressCountry ?? '??',
        family: n.plan.familyExits.map((i) => exits.find((e) => e.plan.index === i)?.fingerprint ?? ''),
      }));
  }

  get nodes(): readonly TestnetNode[] {
    return this.started.map((n) => ({
      role: n.plan.role,
      nickname: n.plan.nickname,
      fingerprint: n.fingerprint,
      address: n.plan.address,
      orPort: n.plan.orPort,
      dirPort: n.plan.dirPort,
      pid: n.tor.pid,
    }));
  }

  get whoami(): WhoamiServer {
    if (!this.whoamiServer) throw new TestnetError('whoami server not started');
    return this.whoamiServer;
  }

  get dns(): { readonly host: string; readonly port: number } {
    if (!this.dnsServer) throw new TestnetError('dns responder not started');
    return { host: this.dnsServer.host, port: this.dnsServer.port };
  }

  get pids(): readonly number[] {
    return this.started.map((n) => n.tor.pid);
  }

  get usableAfterMs(): number | undefined {
    return this.usableMs;
  }

  get stopped(): boolean {
    return this.stopPromise !== undefined;
  }

  private requirePlan(): TestnetPlan {
    if (!this.plan) throw new TestnetError('network not planned yet');
    return this.plan;
  }

  async start(options: TestnetOptions, gencertBinary: string): Promise<void> {
    const relays = options.relays ?? DEFAULT_RELAYS;
    const exits = options.exits ?? DEFAULT_EXITS;
    const exitCountries = options.exitCountries ?? DEFAULT_EXIT_COUNTRIES;
    const egressElsewhere = options.egressElsewhere ?? false;
    const requestedBase = options.basePort ?? DEFAULT_BASE_PORT;
    this.block = await reservePortBlock({
      basePort: requestedBase,
      exact: options.basePort !== undefined,
      span: portSpan(relays, exits),
      endpointsFor: (base) => plannedEndpoints(planTopology({ basePort: base, relays, exits, exitCountries, egressElsewhere, workDir: this.workDir })),
    });
    const plan = planTopology({ basePort: this.block.basePort, relays, exits, exitCountries, egressElsewhere, workDir: this.workDir });
    this.plan = plan;
    this.log.info('starting test network', { workDir: this.workDir, basePort: plan.basePort, authorities: AUTHORITY_COUNT, relays, exits });

    this.dnsServer = await DnsResponder.start({ port: plan.dnsPort, log: this.log });
    this.whoamiServer = await WhoamiServer.start({ port: plan.whoamiPort, log: this.log });

    const files: SharedFiles = {
      geoipFile: this.geoipFile,
      geoip6File: this.geoip6File,
      resolvConfFile: path.join(this.workDir, 'resolv.conf'),
      bandwidthFile: path.join(this.workDir, 'bandwidth'),
    };
    const exitPlans = plan.nodes.filter((n) => n.role === 'exit');
    for (const node of plan.nodes) mkdirSync(node.dir, { recursive: true, mode: 0o700 });
    await Promise.all([
      writeFile(files.resolvConfFile, `${this.dnsServer.resolvConfLine()}\n`),
      writeFile(
        files.geoipFile,
        geoipFileContent(exitPlans.flatMap((n) => [{ address: n.address, country: n.country ?? '??' }, { address: n.egressAddress, country: n.egressCountry ?? '??' }])),
      ),
      writeFile(files.geoip6File, geoip6FileContent()),
      writeFile(this.defaultsTorrc, '# intentionally empty: no system-wide tor defaults for the test network\n'),
    ]);

    const keygenStarted = Date.now();
    const keygenTools = (node: NodePlan): KeygenTools => ({
      torBinary: this.torBinary,
      gencertBinary,
      defaultsTorrc: this.defaultsTorrc,
      torEnv: this.torEnvironment(node),
    });
    const identities = await Promise.all(
      plan.nodes.map(async (node) => {
        const [fingerprint, v3Identity] = await Promise.all([
          generateRelayIdentity(node, keygenTools(node)),
          node.role === 'authority' ? generateAuthorityKeys(node, keygenTools(node)) : Promise.resolve(undefined),
        ]);
        return { node, fingerprint, v3Identity };
      }),
    );
    this.log.info('keys generated', { durationMs: Date.now() - keygenStarted, nodes: identities.length });

    const authorities: AuthorityIdentity[] = identities.flatMap(({ node, fingerprint, v3Identity }) =>
      node.role === 'authority' && v3Identity !== undefined
        ? [{ nickname: node.nickname, address: node.address, orPort: node.orPort, dirPort: node.dirPort, v3Identity, fingerprint }]
        : [],
    );
    const fingerprintsOf = (role: NodeRole): string[] => identities.filter((i) => i.node.role === role).map((i) => i.fingerprint);
    await writeFile(
      this.exitListFile,
      exitListFileContent(
        identities.filter((i) => i.node.role === 'exit').map((i) => ({ fingerprint: i.fingerprint, exitAddress: i.node.egressAddress })),
        new Date(),
      ),
    );
    this.clientLines = networkMembershipLines(authorities, files);
    await this.writeBandwidthFile(files.bandwidthFile, identities.map((i) => i.fingerprint));
    this.refreshTimer = setInterval(() => {
      void this.writeBandwidthFile(files.bandwidthFile, identities.map((i) => i.fingerprint));
    }, BANDWIDTH_FILE_REFRESH_MS);
    this.refreshTimer.unref();

    for (const { node, fingerprint } of identities) {
      const lines = nodeTorrcLines({
        node,
        authorities,
        files,
        exitFingerprints: fingerprintsOf('exit'),
        guardFingerprints: fingerprintsOf('relay'),
        familyFingerprints: node.familyExits.map((i) => fingerprintsOf('exit')[i] as string),
        owningPid: process.pid,
      });
      await writeFile(nodeTorrcPath(node), renderTorrc(lines));
      const tor = TorProcess.spawn({
        name: node.nickname,
        torBinary: this.torBinary,
        torrcPath: nodeTorrcPath(node),
        defaultsTorrc: this.defaultsTorrc,
        env: this.torEnvironment(node),
        outputFile: path.join(node.dir, 'stdout.log'),
        logFiles: [nodeLogFile(node)],
        log: this.log,
      });
      tor.onUnexpectedExit((exit) => this.failures.push(tor.exitedError(exit)));
      this.started.push({ plan: node, fingerprint, tor });
    }

    await Promise.all(this.started.map((n) => n.tor.waitForPidFile(nodePidFile(n.plan), PID_FILE_TIMEOUT_MS)));
    for (const n of this.started) {
      if (!(await isShimMapped(n.tor.pid, this.shimLibrary))) throw new ShimNotLoadedError(n.plan.nickname, n.tor.pid);
    }
    this.log.info('test network tors running', {
      pids: this.pids,
      shim: 'mapped in every tor',
      startMs: Date.now() - this.startedAt,
    });
  }

  /** A minimal environment: nothing from the caller's (say, a foreign LD_PRELOAD or proxy variable) leaks in. */
  private torEnvironment(node: NodePlan): NodeJS.ProcessEnv {
    return {
      PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin',
      HOME: node.dir,
      LANG: 'C',
      LD_PRELOAD: this.shimLibrary,
      EXITPOOL_SHIM_BIND_IPV4: node.address,
      // An exit whose traffic leaves from another address (EGRESS_ELSEWHERE_EXITS): relay traffic
      // to the network's own ports keeps the published address.
      ...(node.egressAddress !== node.address
        ? { EXITPOOL_SHIM_EXIT_BIND_IPV4: node.egressAddress, EXITPOOL_SHIM_RELAY_PORTS: `${this.requirePlan().relayPorts.low}-${this.requirePlan().relayPorts.high}` }
        : {}),
    };
  }

  private async writeBandwidthFile(file: string, fingerprints: readonly string[]): Promise<void> {
    try {
      // Written aside and renamed: an authority must never read a half-written file.
      const temporary = `${file}.tmp`;
      await writeFile(temporary, bandwidthFileContent(fingerprints));
      await rename(temporary, file);
    } catch (err) {
      this.log.warn('bandwidth file not written', { error: errorMessage(err) });
    }
  }

  private usabilityExpectation(): UsabilityExpectation {
    const flagsFor: Record<NodeRole, readonly string[]> = {
      authority: ['Authority', 'Running', 'Valid'],
      relay: ['Running', 'Valid', 'Fast', 'Stable', 'Guard'],
      exit: ['Running', 'Valid', 'Fast', 'Stable', 'Exit'],
    };
    return {
      required: this.started.map((n) => ({ nickname: n.plan.nickname, fingerprint: n.fingerprint, flags: flagsFor[n.plan.role] })),
    };
  }

  waitUntilUsable(timeoutMs: number = DEFAULT_USABLE_TIMEOUT_MS): Promise<void> {
    if (this.usableMs !== undefined) return Promise.resolve();
    this.usablePromise ??= this.pollUntilUsable(timeoutMs).catch((err: unknown) => {
      this.usablePromise = undefined;
      throw err;
    });
    return this.usablePromise;
  }

  private async pollUntilUsable(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (this.stopped) throw new TestnetStoppedError();
      const failure = this.failures[0];
      if (failure) throw failure;
      const problems = await this.usabilityProblemsNow();
      if (problems.length === 0) {
        this.usableMs = Date.now() - this.startedAt;
        this.log.info('test network usable', { usableAfterMs: this.usableMs, exits: this.exits.map((e) => `${e.nickname}@${e.address}/${e.country}`) });
        return;
      }
      if (Date.now() + CONSENSUS_POLL_MS > deadline) throw new TestnetNotUsableError(timeoutMs, problems);
      this.log.debug('waiting for a usable network', { problems: problems.slice(0, 5) });
      await delay(CONSENSUS_POLL_MS);
    }
  }

  /**
   * Usable = every authority serves a consensus listing every relay with its flags, and every
   * directory cache (all relays and exits) holds every microdescriptor of that consensus.
   */
  private async usabilityProblemsNow(): Promise<string[]> {
    const expectation = this.usabilityExpectation();
    const authorities = this.started.filter((n) => n.plan.role === 'authority');
    const digests = new Set<string>();
    const perAuthority = await Promise.all(
      authorities.map(async (a) => {
        try {
          const res = await fetchDirectoryDocument(a.plan.address, a.plan.dirPort, CONSENSUS_PATH, DIRECTORY_FETCH_TIMEOUT_MS);
          if (res.status !== 200) return [`${a.plan.nickname}: no consensus (HTTP ${res.status})`];
          const consensus = parseConsensus(res.body);
          for (const router of consensus.routers) if (router.microdescDigest) digests.add(router.microdescDigest);
          return usabilityProblems(consensus, expectation).map((p) => `${a.plan.nickname}: ${p}`);
        } catch (err) {
          return [`${a.plan.nickname}: ${errorMessage(err)}`];
        }
      }),
    );
    const consensusProblems = perAuthority.flat();
    if (consensusProblems.length > 0) return consensusProblems;
    const wanted = [...digests];
    const caches = this.started.filter((n) => n.plan.role !== 'authority');
    const perCache = await Promise.all(
      caches.map(async (c) => {
        try {
          const res = await fetchDirectoryDocument(c.plan.address, c.plan.dirPort, `/tor/micro/d/${wanted.join('-')}`, DIRECTORY_FETCH_TIMEOUT_MS);
          const held = res.status === 200 ? countMicrodescriptors(res.body) : 0;
          return held >= wanted.length ? [] : [`${c.plan.nickname}: cache holds ${held}/${wanted.length} microdescriptors`];
        } catch (err) {
          return [`${c.plan.nickname}: ${errorMessage(err)}`];
        }
      }),
    );
    return perCache.flat();
  }

  stop(): Promise<void> {
    this.stopPromise ??= this.stopEverything();
    return this.stopPromise;
  }

  private async stopEverything(): Promise<void> {
    const began = Date.now();
    if (this.refreshTimer) clearInterval(this.refreshTimer);
    await Promise.all(this.started.map((n) => n.tor.stop(this.stopGraceMs)));
    // Clients a test started inside the work dir and forgot to stop must not outlive it.
    const leftovers = liveTorsOfRun(this.workDir);
    if (leftovers.length > 0) {
      this.log.warn('stopping tors left running inside the work dir', { pids: leftovers });
      await terminateProcesses(leftovers, this.log);
    }
    await Promise.all([this.dnsServer?.close(), this.whoamiServer?.close()]);
    if (this.keepWorkDir) {
      tryRun('marking the kept work dir', this.log, () => markRunKept(this.workDir));
    } else {
      await rm(this.workDir, { recursive: true, force: true, maxRetries: 3 });
      untrackWorkDir(this.workDir);
    }
    tryRun('port block release', this.log, () => this.block?.release());
    this.log.info('test network stopped', { durationMs: Date.now() - began, workDir: this.workDir, kept: this.keepWorkDir });
  }
}

async function prepareWorkDir(workDir: string, explicit: boolean, log: Logger): Promise<void> {
  if (existsSync(workDir)) {
    const entries = readdirSync(workDir);
    if (entries.includes(OWNER_FILE)) {
      if (isRunOwnerAlive(workDir)) throw new WorkDirInUseError(workDir, 'a running test network owns it');
      await reapRun(workDir, log);
    } else if (entries.includes(KEPT_RUN_FILE)) {
      await reapRun(workDir, log);
    } else if (entries.length > 0) {
      // Never wipe a directory this module did not create.
      throw new WorkDirInUseError(workDir, explicit ? 'not empty and not a test network dir' : 'unexpectedly exists');
    }
  }
  mkdirSync(workDir, { recursive: true, mode: 0o700 });
  writeOwnerFile(workDir);
}

/**
 * Starts a private Tor network on loopback: 3 directory authorities, middle relays, exits (each
 * leaving from its own 127.0.0.N), a DNS responder and a whoami destination. Resolves once every
 * tor runs with the loopback shim mapped; call waitUntilUsable() before building circuits.
 */
export async function startTestnet(options: TestnetOptions = {}): Promise<Testnet> {
  const startedAt = Date.now();
  const log = options.log ?? childLogger({ component: 'testnet' });
  validateTopology({
    basePort: options.basePort ?? DEFAULT_BASE_PORT,
    relays: options.relays ?? DEFAULT_RELAYS,
    exits: options.exits ?? DEFAULT_EXITS,
    exitCountries: options.exitCountries ?? DEFAULT_EXIT_COUNTRIES,
  });
  const torBinary = findExecutable('tor');
  const gencertBinary = findExecutable('tor-gencert');
  const repoRoot = findRepoRoot();
  const root = path.join(repoRoot, TESTNET_ROOT_DIR);
  try {
    await reapStaleRuns(root, log);
  } catch (err) {
    log.warn('stale test network reaping failed', { error: errorMessage(err) });
  }
  const shimLibrary = await ensureShimBuilt(repoRoot, path.join(root, SHIM_CACHE_DIR), log);
  const runId = `run-${new Date().toISOString().replace(/[:.]/g, '-')}-${process.pid}-${randomBytes(3).toString('hex')}`;
  const workDir = options.workDir ? path.resolve(options.workDir) : path.join(root, runId);
  await prepareWorkDir(workDir, options.workDir !== undefined, log);
  if (!options.keepWorkDir) trackWorkDir(workDir);

  const testnet = new RunningTestnet(torBinary, shimLibrary, workDir, options, log, startedAt);
  try {
    await testnet.start(options, gencertBinary);
  } catch (err) {
    log.error('test network failed to start', { error: errorMessage(err) });
    await testnet.stop().catch((stopErr: unknown) => log.error('cleanup after failed start failed', { error: errorMessage(stopErr) }));
    throw err;
  }
  return testnet;
}
