/**
 * exitpool next to the stacks users would run instead, in front of the same tor clients of the
 * private network: straight to the tors (the client spreads itself), HAProxy (TCP round robin),
 * a bare one-process Node relay (round robin, pipe both ways), and exitpool (token auth, one
 * session per client). One load generator for all; rounds interleaved.
 */
import os from 'node:os';
import type { InstanceView, SessionView } from '../shared/api/views.js';
import { defaultProxyWorkers } from '../shared/config/proxy-workers.js';
import type { SocksTunnelOptions } from '../test/support/clients/socks5-client.js';
import { TEST_PROXY_TOKEN, startService, type RunningService } from '../test/support/fixtures/service.js';
import { serviceWorkers } from '../test/support/processes/inspection.js';
import { addedAtP50, BURST_PAUSE_MS, burstPair, oneRequest, relayAddedAtP50, relayBurst, sortedCopy, type BurstPair } from './burst.js';
import { startChildServer, type ChildServer } from './child-server.js';
import { startHaproxy, type RunningHaproxy } from './haproxy.js';
import { PASS_THROUGH_CREDENTIALS } from './pass-through-credentials.js';
import { measureConnectionCeilings, type Ceiling } from './connection-ceiling.js';
import { concernsOf, SUPERVISOR_CONCERNS } from './cpu-profile-concerns.js';
import { monotonicMicros, profileFileOf, summariseCpuProfile, type CodeKind, type ProfileWindow } from './cpu-profile-summary.js';
import { cpuMs, rssBytes } from './process-usage.js';
import { percentile, type BenchSection, type Figure } from './report.js';

export interface PeersBenchOptions {
  /** Concurrent clients, each in a closed loop: connect, SOCKS5, CONNECT, GET, close. */
  clients: number;
  roundMs: number;
  rounds: number;
  /** Connections started at once on one session, through the pool and straight to its instance. */
  burst: number;
  /** Warm bursts of each kind (a session new to the workers, a leased one) per service, after the rounds. */
  bursts: number;
  /** The connections/s ceiling of the proxy layer: closed-loop clients and the length of each round. */
  ceilingInFlight: number;
  ceilingRoundMs: number;
}

/**
 * Set to a directory, the service runs with --cpu-prof (every process; slower, so only shares
 * count) and the section adds where the supervisor's busy time went during exitpool's rounds.
 */
export const PEERS_CPU_PROFILE_DIR_ENV = 'PEERS_CPU_PROFILE_DIR';

/** Node options for the services' processes, to compare runtime settings (V8 heap sizes) in one run's terms. */
export const PEERS_NODE_OPTIONS_ENV = 'PEERS_NODE_OPTIONS';

export const FULL_PEERS_OPTIONS: PeersBenchOptions = { clients: 32, roundMs: 15_000, rounds: 2, burst: 200, bursts: 4, ceilingInFlight: 64, ceilingRoundMs: 3_000 };

/** Issue 16's budgets, each against its reference in the same run. */
const CPU_VS_BARE_RELAY_BUDGET = 1.3;
const SUPERVISOR_CPU_BUDGET_US = 50;
const BURST_ADDED_P50_BUDGET_MS = 20;
const REQUESTS_VS_DIRECT_BUDGET = 0.97;
const POOL_SIZE = 4;
/** The default worker count on this machine (shared/config/proxy-workers.ts), and the other choice measured next to it. */
const DEFAULT_WORKERS = defaultProxyWorkers();
const OTHER_WORKERS = os.availableParallelism() !== DEFAULT_WORKERS ? os.availableParallelism() : DEFAULT_WORKERS * 2;
const OTHER_CHOICE = `exitpool, PROXY_WORKERS=${OTHER_WORKERS}`;
/** Requests straight to each instance before anything is timed: its circuits and the exit's DNS are warm for both sides of every burst. */
const INSTANCE_WARM_UP_REQUESTS = 20;

type PathName = string;
/**
 * The defaults (PROXY_WORKERS from the cores: DEFAULT_WORKERS here); the other worker count
 * (what a worker more or less costs per request, bursts and ceiling on this machine); and tor
 * choosing its own exits (what following its streams costs the supervisor).
 */
const EXITPOOL_PATHS: readonly PathName[] = ['exitpool', OTHER_CHOICE, 'exitpool, PIN_EXIT_RELAY=0'];

interface Measured {
  requests: number;
  failures: number;
  ms: number;
  latencies: number[];
  /** CPU by process role, ms, over the runs of this path. */
  cpu: Map<string, number>;
}

interface Path {
  name: PathName;
  /** The tunnel options for the n-th connection of client `client`. */
  options(client: number, n: number): SocksTunnelOptions;
  /** The processes this path adds, by role. */
  processes(): Map<string, number>;
}

async function load(path: Path, o: PeersBenchOptions, host: string, into: Measured, windows?: ProfileWindow[]): Promise<void> {
  const roles = path.processes();
  const before = new Map([...roles].map(([role, pid]) => [role, cpuMs(pid)]));
  const window = { fromUs: monotonicMicros(), toUs: Number.POSITIVE_INFINITY };
  windows?.push(window);
  const started = performance.now();
  const until = started + o.roundMs;
  await Promise.all(
    Array.from({ length: o.clients }, async (_, client) => {
      for (let n = 0; performance.now() < until; n++) {
        const t0 = performance.now();
        const ok = await oneRequest(path.options(client, n), host);
        if (ok) {
          into.requests++;
          into.latencies.push(performance.now() - t0);
        } else {
          into.failures++;
        }
      }
    }),
  );
  into.ms += performance.now() - started;
  window.toUs = monotonicMicros();
  for (const [role, pid] of roles) into.cpu.set(role, (into.cpu.get(role) ?? 0) + cpuMs(pid) - (before.get(role) ?? 0));
}

const sorted = sortedCopy;
const us = (cpuMsTotal: number, requests: number): number => (requests === 0 ? 0 : (cpuMsTotal * 1000) / requests);
const mib = (bytes: number | null): string => (bytes === null ? '?' : `${(bytes / 2 ** 20).toFixed(0)} MiB`);

/** A service's Node processes by role: the supervisor, each proxy worker, the API worker. */
function processesOf(supervisorPid: number, workers: { proxy: number[]; api: number[] }): [string, number][] {
  return [
    ['supervisor', supervisorPid],
    ...workers.proxy.map((pid, i): [string, number] => [`proxy worker ${i + 1}`, pid]),
    ...workers.api.map((pid): [string, number] => ['API worker', pid]),
  ];
}

interface RssReadings {
  /** The default service's processes once ready, before the load. */
  atStart: [string, number | null][];
  afterLoad: [string, number | null][];
  otherAfterLoad: [string, number | null][];
  haproxy: number | null;
  relay: number | null;
}

/** The bursts of one service: its first traffic (cold), then after the rounds on sessions new to the workers and on a leased one. */
interface ServiceBursts {
  cold: BurstPair;
  fresh: BurstPair[];
  leased: BurstPair[];
}

export async function benchPeers(o: PeersBenchOptions = FULL_PEERS_OPTIONS): Promise<BenchSection> {
  const stops: (() => Promise<unknown>)[] = [];
  const loadAtStart = os.loadavg()[0] as number;
  try {
    const profileDir = process.env[PEERS_CPU_PROFILE_DIR_ENV];
    const nodeOptions = [profileDir ? `--cpu-prof --cpu-prof-dir=${profileDir}` : '', process.env[PEERS_NODE_OPTIONS_ENV] ?? ''].join(' ').trim();
    // The test fixture's own PROXY_WORKERS is removed: the defaults are the defaults.
    const serviceEnv = {
      POOL_SIZE: String(POOL_SIZE),
      PROXY_WORKERS: undefined,
      LOG_LEVEL: 'warn',
      ...(nodeOptions === '' ? {} : { NODE_OPTIONS: nodeOptions }),
    };
    // The defaults (each instance pinned to its assigned exit: the supervisor stops following every
    // stream once it is confirmed), and PIN_EXIT_RELAY=0 (tor picks its exits: streams followed).
    const svc: RunningService = await startService(serviceEnv);
    stops.push(() => svc.stop());
    const otherSvc: RunningService = await startService({ ...serviceEnv, PROXY_WORKERS: String(OTHER_WORKERS) });
    stops.push(() => otherSvc.stop());
    const torChoiceSvc: RunningService = await startService({ ...serviceEnv, PIN_EXIT_RELAY: '0' });
    stops.push(() => torChoiceSvc.stop());
    await svc.waitReady(POOL_SIZE, 180_000);
    await otherSvc.waitReady(POOL_SIZE, 180_000);
    await torChoiceSvc.waitReady(POOL_SIZE, 180_000);
    const workers = serviceWorkers(svc.pid);
    const otherPids = serviceWorkers(otherSvc.pid);
    const rssOf = (supervisorPid: number, pids: { proxy: number[]; api: number[] }): [string, number | null][] =>
      processesOf(supervisorPid, pids).map(([role, pid]) => [role, rssBytes(pid)]);
    // What the service's processes hold once ready, before any proxied connection.
    const rssAtStart = rssOf(svc.pid, workers);
    const host = `whoami.testnet:${svc.net.whoami.port}`;
    const target = { host: 'whoami.testnet', targetPort: svc.net.whoami.port };
    const bearers = new Map<RunningService, string>([
      [svc, await svc.login()],
      [otherSvc, await otherSvc.login()],
    ]);
    const socketsOf = async (service: RunningService): Promise<Map<number, string>> => {
      const list = (await (await service.api('/api/instances', { bearer: bearers.get(service) as string })).json()) as InstanceView[];
      return new Map(list.map((i) => [i.id, i.socks_addr.replace(/^unix:/, '')]));
    };
    const burstSockets = new Map<RunningService, Map<number, string>>([
      [svc, await socketsOf(svc)],
      [otherSvc, await socketsOf(otherSvc)],
    ]);
    // Every instance warm straight (not through the pool): both sides of a burst find tor's side alike.
    for (const sockets of burstSockets.values()) {
      for (const socket of sockets.values()) await Promise.all(Array.from({ length: INSTANCE_WARM_UP_REQUESTS }, () => oneRequest({ ...target, proxyPath: socket }, host)));
    }
    // The default service's bursts also go through a bare Node relay in front of the session's
    // instance, one per instance, started now (as fresh as the service for its first burst).
    const burstRelays = new Map<string, ChildServer>();
    for (const socket of (burstSockets.get(svc) as Map<number, string>).values()) {
      const burstRelay = await startChildServer('bare-relay', [socket]);
      stops.push(() => burstRelay.stop());
      burstRelays.set(socket, burstRelay);
    }
    const burstShape = { burst: o.burst, host, target };
    const burstPairOf = async (service: RunningService, key: string, directFirst: boolean): Promise<BurstPair> => {
      const pair = await burstPair({
        ...burstShape,
        directFirst,
        pool: () => ({ ...target, port: service.socksPort, username: key, password: TEST_PROXY_TOKEN }),
        instanceSocket: async () => {
          const session = (await (await service.api(`/api/sessions/${key}`, { bearer: bearers.get(service) as string })).json()) as SessionView;
          return burstSockets.get(service)?.get(session.instance ?? -1) ?? '';
        },
      });
      const relayPort = service === svc ? burstRelays.get(pair.instanceSocket)?.port : undefined;
      if (relayPort !== undefined) pair.relay = await relayBurst(burstShape, relayPort);
      return pair;
    };
    // The harder case (a black-box run's): the service's first traffic is a burst on a session
    // new to its workers, which all wait for one route answer. The pool goes first (the session's
    // instance is known once it is routed); the instances were warmed straight above.
    const cold = { defaults: await burstPairOf(svc, 'cold-burst', false), other: await burstPairOf(otherSvc, 'cold-burst', false) };

    const sockets = [...(burstSockets.get(svc) as Map<number, string>).values()];
    const haproxy: RunningHaproxy = await startHaproxy(sockets);
    stops.push(() => haproxy.stop());
    const relay: ChildServer = await startChildServer('bare-relay', sockets, profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : []);
    stops.push(() => relay.stop());
    const exitpoolPath = (name: PathName, service: RunningService, pids = serviceWorkers(service.pid)): Path => ({
      name,
      options: (client) => ({ ...target, port: service.socksPort, username: `peer-${client}`, password: TEST_PROXY_TOKEN }),
      processes: () => new Map<string, number>(processesOf(service.pid, pids)),
    });
    let spread = 0;
    const paths: Path[] = [
      { name: 'direct', options: () => ({ ...target, proxyPath: sockets[spread++ % sockets.length] as string }), processes: () => new Map() },
      // The pass-through proxies' clients present credentials as exitpool's do (PASS_THROUGH_CREDENTIALS).
      { name: 'haproxy', options: () => ({ ...target, port: haproxy.port, ...PASS_THROUGH_CREDENTIALS }), processes: () => new Map([['haproxy', haproxy.pid]]) },
      { name: 'bare relay', options: () => ({ ...target, port: relay.port, ...PASS_THROUGH_CREDENTIALS }), processes: () => new Map([['bare relay', relay.pid]]) },
      exitpoolPath('exitpool', svc, workers),
      exitpoolPath(OTHER_CHOICE, otherSvc, otherPids),
      exitpoolPath('exitpool, PIN_EXIT_RELAY=0', torChoiceSvc),
    ];
    const windows = new Map<PathName, ProfileWindow[]>([...EXITPOOL_PATHS, 'bare relay'].map((name) => [name, []]));
    const results = new Map<PathName, Measured>(paths.map((p) => [p.name, { requests: 0, failures: 0, ms: 0, latencies: [], cpu: new Map() }]));
    // Warm-up: circuits built, sessions placed, JIT warm on every path.
    for (const p of paths) await load(p, { ...o, roundMs: 2_000 }, host, { requests: 0, failures: 0, ms: 0, latencies: [], cpu: new Map() });
    for (let round = 0; round < o.rounds; round++) {
      // Each round starts with another path, so drift on the shared machine hits all of them.
      const order = paths.map((_, i) => paths[(i + round) % paths.length] as Path);
      for (const p of order) await load(p, o, host, results.get(p.name) as Measured, windows.get(p.name));
    }

    // Warm bursts: sessions new to the workers (pool first), and one leased session (order alternated).
    const warmBursts = async (service: RunningService): Promise<Omit<ServiceBursts, 'cold'>> => {
      const fresh: BurstPair[] = [];
      const leased: BurstPair[] = [];
      await oneRequest({ ...target, port: service.socksPort, username: 'leased-burst', password: TEST_PROXY_TOKEN }, host);
      for (let b = 0; b < o.bursts; b++) {
        fresh.push(await burstPairOf(service, `fresh-burst-${b}`, false));
        leased.push(await burstPairOf(service, 'leased-burst', b % 2 === 1));
      }
      return { fresh, leased };
    };
    const bursts = { defaults: { cold: cold.defaults, ...(await warmBursts(svc)) }, other: { cold: cold.other, ...(await warmBursts(otherSvc)) } };

    const rss: RssReadings = {
      atStart: rssAtStart,
      afterLoad: rssOf(svc.pid, workers),
      otherAfterLoad: rssOf(otherSvc.pid, otherPids),
      haproxy: rssBytes(haproxy.pid),
      relay: rssBytes(relay.pid),
    };
    const ceilings = await measureConnectionCeilings({ workerCounts: [DEFAULT_WORKERS, OTHER_WORKERS], inFlight: o.ceilingInFlight, roundMs: o.ceilingRoundMs, rounds: 2 });
    const section = report(o, results, bursts, rss, haproxy.version, ceilings, [loadAtStart, os.loadavg()[0] as number]);
    if (profileDir) {
      // The profiles are written when the processes exit.
      for (const stop of stops.splice(0).reverse()) await stop().catch(() => undefined);
      section.figures.push(supervisorProfileFigure('exitpool', profileDir, svc.pid, windows.get('exitpool') ?? []));
      section.figures.push(supervisorProfileFigure('exitpool, PIN_EXIT_RELAY=0', profileDir, torChoiceSvc.pid, windows.get('exitpool, PIN_EXIT_RELAY=0') ?? []));
      const perRequest = (name: PathName, pids: number[]): KindsPerRequest => kindsPerRequest(profileDir, pids, windows.get(name) ?? [], results.get(name)?.requests ?? 0);
      section.figures.push(
        proxyingProfileFigure([
          ['bare relay', perRequest('bare relay', [relay.pid])],
          [`exitpool, proxy worker${workers.proxy.length > 1 ? 's' : ''}`, perRequest('exitpool', workers.proxy)],
          [`${OTHER_CHOICE}, proxy worker${otherPids.proxy.length > 1 ? 's' : ''}`, perRequest(OTHER_CHOICE, otherPids.proxy)],
        ]),
      );
    }
    return section;
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
  }
}

type KindsPerRequest = { totalUs: number; byKind: Record<CodeKind, number> } | null;

/** The busy time of these processes' profiles inside the windows, per request served, by kind of code. */
function kindsPerRequest(dir: string, pids: number[], windows: ProfileWindow[], requests: number): KindsPerRequest {
  const byKind: Record<CodeKind, number> = { native: 0, node: 0, exitpool: 0, gc: 0, other: 0 };
  for (const pid of pids) {
    const file = profileFileOf(dir, pid);
    if (!file || requests === 0) return null;
    const summary = summariseCpuProfile(file, windows);
    for (const kind of Object.keys(byKind) as CodeKind[]) byKind[kind] += (summary.byKind[kind] * 1000) / requests;
  }
  return { totalUs: Object.values(byKind).reduce((a, b) => a + b, 0), byKind };
}

const KIND_NAMES: Record<CodeKind, string> = { native: 'native calls (mostly system calls)', node: "Node's own JavaScript (streams, net, events, timers)", exitpool: "exitpool's code", gc: 'GC', other: 'other' };

/**
 * Where each proxying process's time goes per request, side by side (profiled run, so slower
 * than the unprofiled figures; the shares and the differences are what count).
 */
function proxyingProfileFigure(rows: [string, KindsPerRequest][]): Figure {
  const value = rows
    .map(([name, k]) =>
      k === null
        ? `${name}: no profile`
        : `${name} ${k.totalUs.toFixed(0)} µs (${(Object.keys(KIND_NAMES) as CodeKind[]).map((kind) => `${KIND_NAMES[kind]} ${k.byKind[kind].toFixed(0)}`).join(', ')})`,
    )
    .join('; ');
  return { name: 'busy time per proxied request by kind of code, profiled run', value, limit: '', withinLimit: null };
}

function supervisorProfileFigure(path_: PathName, dir: string, pid: number, windows: ProfileWindow[]): Figure {
  const file = profileFileOf(dir, pid);
  if (!file) return { name: `${path_}: supervisor busy time by concern (profiled run)`, value: `no profile of PID ${pid} in ${dir}`, limit: '', withinLimit: null };
  const { busyMs, byConcern } = concernsOf(file, windows, SUPERVISOR_CONCERNS);
  const shares = [...byConcern].sort((a, b) => b[1] - a[1]).map(([c, ms]) => `${c} ${((100 * ms) / busyMs).toFixed(0)} %`);
  return { name: `${path_}: supervisor busy time by concern during its rounds (profiled run)`, value: `${shares.join('; ')} (profile: ${file})`, limit: '', withinLimit: null };
}

function report(
  o: PeersBenchOptions,
  results: Map<PathName, Measured>,
  bursts: { defaults: ServiceBursts; other: ServiceBursts },
  rss: RssReadings,
  haproxyVersion: string,
  ceilings: Ceiling[],
  loadAverages: [number, number],
): BenchSection {
  const m = (name: PathName): Measured => results.get(name) as Measured;
  const rate = (name: PathName): number => (m(name).requests * 1000) / m(name).ms;
  const cpuTotal = (name: PathName): number => [...m(name).cpu.values()].reduce((a, b) => a + b, 0);
  const perRequest = (name: PathName): number => us(cpuTotal(name), m(name).requests);
  const figures: Figure[] = [];
  const isExitpool = (name: PathName): boolean => EXITPOOL_PATHS.includes(name);
  for (const name of ['direct', 'haproxy', 'bare relay', ...EXITPOOL_PATHS]) {
    const lat = sorted(m(name).latencies);
    const byProcess = [...m(name).cpu].map(([role, ms]) => `${role} ${us(ms, m(name).requests).toFixed(0)} µs`).join(', ');
    figures.push({
      name: `${name}: requests/s, latency p50 / p99`,
      value: `${rate(name).toFixed(0)}/s (${(rate(name) / rate('direct')).toFixed(2)} × direct), ${percentile(lat, 0.5).toFixed(1)} / ${percentile(lat, 0.99).toFixed(1)} ms${m(name).failures > 0 ? `, ${m(name).failures} failed` : ''}`,
      // Only the default service shares its tors with direct, HAProxy and the bare relay; the
      // other two services have tor clients of their own, so their rate compares less directly.
      limit: name === 'exitpool' ? `≥ ${REQUESTS_VS_DIRECT_BUDGET} × direct` : '',
      withinLimit: name === 'exitpool' ? rate(name) >= REQUESTS_VS_DIRECT_BUDGET * rate('direct') : null,
    });
    if (name !== 'direct') {
      figures.push({
        name: `${name}: CPU per proxied request`,
        value: `${perRequest(name).toFixed(0)} µs (${(perRequest(name) / perRequest('bare relay')).toFixed(2)} × bare relay${m(name).cpu.size > 1 ? `; ${byProcess}` : ''})`,
        limit: isExitpool(name) ? `≤ ${CPU_VS_BARE_RELAY_BUDGET} × bare relay (${(CPU_VS_BARE_RELAY_BUDGET * perRequest('bare relay')).toFixed(0)} µs)` : '',
        withinLimit: isExitpool(name) ? perRequest(name) <= CPU_VS_BARE_RELAY_BUDGET * perRequest('bare relay') : null,
      });
    }
  }
  for (const name of EXITPOOL_PATHS) {
    const supervisorUs = us(m(name).cpu.get('supervisor') ?? 0, m(name).requests);
    figures.push({ name: `${name}: supervisor CPU per proxied request`, value: `${supervisorUs.toFixed(0)} µs`, limit: `≤ ${SUPERVISOR_CPU_BUDGET_US} µs`, withinLimit: supervisorUs <= SUPERVISOR_CPU_BUDGET_US });
  }
  const added = addedAtP50;
  const median = (values: number[]): number => percentile(sorted(values), 0.5);
  const answered = (pairs: BurstPair[]): string => `${pairs.reduce((n, p) => n + p.pool.length, 0)}/${pairs.length * o.burst} and ${pairs.reduce((n, p) => n + p.direct.length, 0)}/${pairs.length * o.burst} answered`;
  /** The bare relay's figure for the same bursts (the defaults' only), the least a Node process in the path adds here. */
  const relayNote = (pairs: BurstPair[]): string => {
    const each = pairs.map(relayAddedAtP50).filter((v) => !Number.isNaN(v));
    if (each.length === 0) return '';
    return `; a bare Node relay to the same instance added ${median(each).toFixed(0)} ms${each.length > 1 ? ` (${each.map((v) => v.toFixed(0)).join(', ')})` : ''}`;
  };
  for (const [label, b] of [
    ['exitpool', bursts.defaults],
    [OTHER_CHOICE, bursts.other],
  ] as const) {
    figures.push({
      name: `${label}: burst of ${o.burst} connections on a session new to the workers, the fresh service's first traffic (the harder case), p50 / p99 to the response`,
      value: `through the pool ${percentile(b.cold.pool, 0.5).toFixed(0)} / ${percentile(b.cold.pool, 0.99).toFixed(0)} ms, straight to its instance ${percentile(b.cold.direct, 0.5).toFixed(0)} / ${percentile(b.cold.direct, 0.99).toFixed(0)} ms; added at p50 ${added(b.cold).toFixed(0)} ms (${answered([b.cold])}${relayNote([b.cold])})`,
      limit: `≤ ${BURST_ADDED_P50_BUDGET_MS} ms added at p50`,
      withinLimit: added(b.cold) <= BURST_ADDED_P50_BUDGET_MS,
    });
    for (const [kind, pairs] of [
      ['a session new to the workers, after the rounds', b.fresh],
      ['a leased session, after the rounds', b.leased],
    ] as const) {
      const each = pairs.map(added);
      figures.push({
        name: `${label}: burst of ${o.burst} connections on ${kind}, added at p50 (median of ${pairs.length} bursts, each against the same burst straight to its instance)`,
        value: `${median(each).toFixed(0)} ms (${each.map((v) => v.toFixed(0)).join(', ')}; through the pool p50 ${median(pairs.map((p) => percentile(p.pool, 0.5))).toFixed(0)} ms; ${answered(pairs)}${relayNote(pairs)})`,
        limit: `≤ ${BURST_ADDED_P50_BUDGET_MS} ms added at p50`,
        withinLimit: median(each) <= BURST_ADDED_P50_BUDGET_MS,
      });
    }
  }
  const ceiling = ceilings.map((c) => `${c.name} ${c.perSecond.toFixed(0)}/s at ${c.cpuUs.toFixed(0)} µs of CPU each`).join('; ');
  figures.push({ name: `connections/s ceiling of the proxy layer alone (closed loop of ${o.ceilingInFlight}, tunnels opened and closed against a lean SOCKS5 backend, no tor)`, value: ceiling, limit: '', withinLimit: null });
  const total = (readings: [string, number | null][]): number => readings.reduce((sum, [, bytes]) => sum + (bytes ?? 0), 0);
  const byRole = (readings: [string, number | null][]): string => readings.map(([role, bytes]) => `${role} ${mib(bytes)}`).join(', ');
  figures.push({
    name: 'exitpool: RSS of its Node processes once ready, before any proxied connection',
    value: `${mib(total(rss.atStart))} (${byRole(rss.atStart)})`,
    limit: '',
    withinLimit: null,
  });
  figures.push({
    name: 'RSS after the rounds',
    value: `exitpool ${mib(total(rss.afterLoad))} (${byRole(rss.afterLoad)}); ${OTHER_CHOICE} ${mib(total(rss.otherAfterLoad))} (${byRole(rss.otherAfterLoad)}); ${haproxyVersion.split(' ').slice(0, 3).join(' ')} ${mib(rss.haproxy)}; bare relay ${mib(rss.relay)}`,
    limit: '',
    withinLimit: null,
  });
  return {
    title: 'Next to the peers: HAProxy and a bare Node relay in front of the same tors',
    method: [
      `The real service (the CLI, ${POOL_SIZE} instances on the private Tor network), once with the defaults (PROXY_WORKERS from the cores: ${DEFAULT_WORKERS} on this ${os.availableParallelism()}-core machine; PROXY_WARM_UP; each instance pinned to the exit the supervisor assigned it, so the supervisor follows tor's STREAM events only until that exit is confirmed), once with PROXY_WORKERS=${OTHER_WORKERS} (the other choice) and once with PIN_EXIT_RELAY=0 (tor picks its own exits, and the supervisor follows its streams), and, in front of the default service's ${POOL_SIZE} tor instances' SOCKS sockets: HAProxy (Debian's package, TCP mode, round robin), a bare Node relay in one process (round robin, pipes both ways, no parsing) and no proxy at all (the client spreads its connections over the ${POOL_SIZE} sockets itself). Through HAProxy and the relay the clients present a username and password, one pair for all, which tor answers (bench/pass-through-credentials.ts): the same SOCKS5 conversation as exitpool's clients have with their proxy token, so the CPU ratio compares the proxying and not one round trip less; straight to the tors and in the bursts, none.`,
      `One load generator for all (this process, test/support/clients/socks5-client.ts, which like curl waits for each SOCKS5 answer before its next step): ${o.clients} concurrent clients, each in a closed loop of connect, SOCKS5 (exitpool: the proxy token, one session per client), CONNECT to the whoami server through an exit, GET, close.`,
      `${o.rounds} rounds of ${o.roundMs / 1000} s per path after a 2 s warm-up each, the paths' order rotated every round. CPU per proxied request is the CPU time each process of the path used over its rounds divided by the requests served (from /proc; the tors' CPU is not counted). The requests/s budget is checked for the default service only: the other two services run tor clients of their own (through the same exits), so their rates compare less directly.`,
      `The bursts: ${o.burst} connections started at once on one session, through the pool and then straight to the instance serving that session (each time from the burst's start to that request's response; ${BURST_PAUSE_MS} ms of quiet before each burst; every instance first warmed straight with ${INSTANCE_WARM_UP_REQUESTS} requests, so both sides find tor's side alike). The harder case, which a black-box run meets: the fresh service's first traffic is the burst, on a session no worker holds a lease for, so every connection waits for one route answer, in workers that have run nothing but their start-up warm-up. Then, after the rounds, ${o.bursts} bursts on sessions new to the workers and ${o.bursts} on a leased session (direct first every other time). For the defaults and for PROXY_WORKERS=${OTHER_WORKERS}. For the defaults, each burst then goes once more through a bare one-process Node relay (accept, connect, pipe) in front of the same instance, one relay per instance started with the bursts: the least a Node process in the path adds to the same burst on this machine.`,
      `The connections/s ceiling: the proxy layer alone (bench/connection-ceiling.ts: the real proxy workers behind an in-bench supervisor, and the bare relay with its clients' credentials passed through and without, in front of a lean SOCKS5 backend), ${o.ceilingInFlight} clients in a closed loop of connect, SOCKS5, CONNECT, close, 2 rounds of ${o.ceilingRoundMs / 1000} s per path; the load generator shares the cores, so it is a floor of the ceiling.`,
      `The machine's 1-minute load average was ${loadAverages[0].toFixed(1)} at the start of this benchmark and ${loadAverages[1].toFixed(1)} at its end (other work shares the cores; compare ratios within the run).`,
    ].join(' '),
    figures,
  };
}
