/**
 * Why a fresh service's first burst costs more than a later one (issue 38: a black-box run saw
 * +99 ms at p50 where BENCH=peers saw 19–27 ms): the same burst of connections on a session new
 * to the workers, as a fresh service's first proxied traffic and then again a few times, with the
 * start-up warm-up (PROXY_WARM_UP, workers/proxy-worker/warm-up.ts) and without it. Everything
 * but the workers' history is alike between the first burst and the later ones: each on a new
 * session (one route answer waited for by all its connections), each against the same burst
 * straight to the session's instance, that instance warmed straight beforehand. And each against
 * the same burst through a bare one-process Node relay (bare-relay.ts) to that instance, started
 * with the service: the least a Node process in the path adds to such a burst on this
 * machine, its own first burst included.
 */
import os from 'node:os';
import type { InstanceView, SessionView } from '../shared/api/views.js';
import { defaultProxyWorkers } from '../shared/config/proxy-workers.js';
import { STREAM_EVENTS_QUIET_MS } from '../supervisor/tor/exit-control.js';
import { WARM_UP_MAX_MS } from '../workers/proxy-worker/warm-up.js';
import { TEST_PROXY_TOKEN, startService, type RunningService } from '../test/support/fixtures/service.js';
import { serviceWorkers } from '../test/support/processes/inspection.js';
import { pollUntil } from '../test/support/waiting.js';
import { addedAtP50, burstOf, burstPair, oneRequest, relayAddedAtP50, relayBurst, sortedCopy, type BurstPair } from './burst.js';
import { startChildServer, type ChildServer } from './child-server.js';
import { cpuMs } from './process-usage.js';
import { percentile, type BenchSection, type Figure } from './report.js';

export interface ColdBurstOptions {
  burst: number;
  /** Fresh services per setting (warm-up on, off), started one at a time, the settings alternated. */
  servicesPerSetting: number;
  /** Bursts after the first, each on a new session. */
  laterBursts: number;
}

export const FULL_COLD_BURST_OPTIONS: ColdBurstOptions = { burst: 200, servicesPerSetting: 3, laterBursts: 3 };

const POOL_SIZE = 4;
/** Twice STREAM_EVENTS_QUIET_MS (supervisor/tor/exit-control.ts): the supervisor has stopped following STREAM events by then. */
const QUIET_PAUSE_MS = 2 * STREAM_EVENTS_QUIET_MS;
/** Requests straight to each instance before the first burst: its circuits and the exit's DNS are warm for both sides of every burst. */
const INSTANCE_WARM_UP_REQUESTS = 20;
/**
 * The start-up warm-up on and off; and on, with every instance first given a burst of the same
 * size straight (so that what a tor pays for its first burst of streams is paid before the pool's).
 */
interface Setting {
  /** What COLD_BURST_SETTINGS names it by. */
  id: string;
  name: string;
  env: Record<string, string>;
  torBurstFirst: boolean;
  pauseMs: number;
  /** Before the first burst, wait until every instance and spare is ready on an exit whose address was measured (none rotating). */
  settled?: boolean;
  /**
   * Before the first burst, AGE_REQUESTS requests (AGE_CLIENTS closed loops, one session each)
   * through the pool, or straight to the instances: an old service's history, or only its tors'.
   */
  agedThrough?: 'pool' | 'straight';
}
/** About what BENCH=peers has sent through a service before its bursts (its rounds). */
const AGE_REQUESTS = 12_000;
const AGE_CLIENTS = 32;
/** A start-up warm-up ten times the default's: whether more of it does what aging does. */
const LONG_WARM_UP = 5_000;
const ALL_SETTINGS: readonly Setting[] = [
  { id: 'default', name: 'PROXY_WARM_UP default', env: {}, torBurstFirst: false, pauseMs: 0 },
  { id: 'no-warm-up', name: 'PROXY_WARM_UP=0', env: { PROXY_WARM_UP: '0' }, torBurstFirst: false, pauseMs: 0 },
  { id: 'tor-first', name: 'PROXY_WARM_UP default, every tor given a straight burst first', env: {}, torBurstFirst: true, pauseMs: 0 },
  { id: 'quiet', name: `PROXY_WARM_UP default, ${QUIET_PAUSE_MS / 1000} s of quiet before the first burst`, env: {}, torBurstFirst: false, pauseMs: QUIET_PAUSE_MS },
  { id: 'settled', name: 'PROXY_WARM_UP default, the service settled first (every instance and spare ready, its exit measured)', env: {}, torBurstFirst: false, pauseMs: 0, settled: true },
  { id: 'long-warm-up', name: `PROXY_WARM_UP=${LONG_WARM_UP} (its ${WARM_UP_MAX_MS / 1000} s bound, WARM_UP_MAX_MS, may end it sooner)`, env: { PROXY_WARM_UP: String(LONG_WARM_UP) }, torBurstFirst: false, pauseMs: 0 },
  { id: 'aged-pool', name: `PROXY_WARM_UP default, ${AGE_REQUESTS} requests through the pool first`, env: {}, torBurstFirst: false, pauseMs: 0, agedThrough: 'pool' },
  { id: 'aged-straight', name: `PROXY_WARM_UP default, ${AGE_REQUESTS} requests straight to the instances first`, env: {}, torBurstFirst: false, pauseMs: 0, agedThrough: 'straight' },
];
/** COLD_BURST_SETTINGS=id,id… runs only those settings (the ids above); all of them by default. */
export const COLD_BURST_SETTINGS_ENV = 'COLD_BURST_SETTINGS';
const SETTINGS: readonly Setting[] = (() => {
  const wanted = (process.env[COLD_BURST_SETTINGS_ENV] ?? '').split(',').map((s) => s.trim()).filter((s) => s !== '');
  if (wanted.length === 0) return ALL_SETTINGS;
  const unknown = wanted.filter((id) => !ALL_SETTINGS.some((s) => s.id === id));
  if (unknown.length > 0) throw new Error(`${COLD_BURST_SETTINGS_ENV}: no setting ${unknown.join(', ')} (${ALL_SETTINGS.map((s) => s.id).join(', ')})`);
  return ALL_SETTINGS.filter((s) => wanted.includes(s.id));
})();

/** How long a fresh service may take to settle (its spares bootstrapped, every exit measured). */
const SETTLE_TIMEOUT_MS = 120_000;

/** Waits until every instance and spare of `svc` is ready, not rotating, on an exit whose address was measured. */
async function waitSettled(svc: RunningService, bearer: string, timeoutMs: number): Promise<void> {
  await pollUntil('every instance ready on a measured exit', async () => (await (await svc.api('/api/instances', { bearer })).json()) as InstanceView[], timeoutMs, {
    intervalMs: 250,
    until: (list) => list.length > 0 && list.every((i) => i.ready && !i.rotating && i.exit_confirmed && i.exit_ip_source !== '' && i.exit_ip_source !== 'published'),
  });
}

/** A burst pair and the CPU the service's processes spent over it (ms). */
interface TimedPair extends BurstPair {
  supervisorMs: number;
  workersMs: number;
  /** STREAM events the tors sent the supervisor over the pair (pool_tor_control_events_total). */
  streamEvents: number;
}

/** pool_tor_control_events_total{event="STREAM"}. */
async function streamEvents(svc: RunningService): Promise<number> {
  const m = /^pool_tor_control_events_total\{event="STREAM"\} (\d+)/m.exec(await (await svc.api('/metrics')).text());
  return m ? Number(m[1]) : 0;
}

interface ServiceBursts {
  first: TimedPair;
  later: TimedPair[];
}

async function burstsOfAFreshService(setting: Setting, o: ColdBurstOptions): Promise<ServiceBursts> {
  const env = setting.env;
  // The defaults, as an operator gets them (the test fixture's PROXY_WORKERS removed).
  const svc: RunningService = await startService({ POOL_SIZE: String(POOL_SIZE), PROXY_WORKERS: undefined, LOG_LEVEL: 'warn', ...env });
  /** By instance SOCKS socket. */
  const relays = new Map<string, ChildServer>();
  try {
    await svc.waitReady(POOL_SIZE, 180_000);
    const bearer = await svc.login();
    const host = `whoami.testnet:${svc.net.whoami.port}`;
    const target = { host: 'whoami.testnet', targetPort: svc.net.whoami.port };
    if (setting.settled) await waitSettled(svc, bearer, SETTLE_TIMEOUT_MS);
    const list = (await (await svc.api('/api/instances', { bearer })).json()) as InstanceView[];
    const sockets = new Map(list.map((i) => [i.id, i.socks_addr.replace(/^unix:/, '')]));
    for (const socket of sockets.values()) await Promise.all(Array.from({ length: INSTANCE_WARM_UP_REQUESTS }, () => oneRequest({ ...target, proxyPath: socket }, host)));
    if (setting.torBurstFirst) for (const socket of sockets.values()) await burstOf(o.burst, () => ({ ...target, proxyPath: socket }), host);
    if (setting.agedThrough !== undefined) {
      const through = setting.agedThrough;
      const straight = [...sockets.values()];
      let sent = 0;
      await Promise.all(
        Array.from({ length: AGE_CLIENTS }, async (_, lane) => {
          while (sent < AGE_REQUESTS) {
            sent++;
            const via = through === 'pool' ? { port: svc.socksPort, username: `aging-${lane}`, password: TEST_PROXY_TOKEN } : { proxyPath: straight[sent % straight.length] as string };
            await oneRequest({ ...target, ...via }, host);
          }
        }),
      );
    }
    // One bare relay per instance, fresh as the service's workers are (its first burst is the pair's first).
    for (const socket of sockets.values()) relays.set(socket, await startChildServer('bare-relay', [socket]));
    if (setting.pauseMs > 0) await new Promise((resolve) => setTimeout(resolve, setting.pauseMs));
    const workers = serviceWorkers(svc.pid).proxy;
    const workersCpu = (): number => workers.reduce((sum, pid) => sum + cpuMs(pid), 0);
    const pairOn = async (key: string): Promise<TimedPair> => {
      const before = { supervisor: cpuMs(svc.pid), workers: workersCpu(), streams: await streamEvents(svc) };
      const shape = { burst: o.burst, host, target };
      const pair = await burstPair({
        ...shape,
        directFirst: false,
        pool: () => ({ ...target, port: svc.socksPort, username: key, password: TEST_PROXY_TOKEN }),
        instanceSocket: async () => {
          const session = (await (await svc.api(`/api/sessions/${key}`, { bearer })).json()) as SessionView;
          return sockets.get(session.instance ?? -1) ?? '';
        },
      });
      const after = { supervisor: cpuMs(svc.pid), workers: workersCpu(), streams: await streamEvents(svc) };
      const relayPort = relays.get(pair.instanceSocket)?.port;
      if (relayPort !== undefined) pair.relay = await relayBurst(shape, relayPort);
      return { ...pair, supervisorMs: after.supervisor - before.supervisor, workersMs: after.workers - before.workers, streamEvents: after.streams - before.streams };
    };
    const first = await pairOn('first-burst');
    const later: TimedPair[] = [];
    for (let b = 0; b < o.laterBursts; b++) later.push(await pairOn(`later-burst-${b}`));
    return { first, later };
  } finally {
    for (const relay of relays.values()) await relay.stop();
    await svc.stop();
  }
}

export async function benchColdBurst(o: ColdBurstOptions = FULL_COLD_BURST_OPTIONS): Promise<BenchSection> {
  const loadAtStart = os.loadavg()[0] as number;
  const results = new Map<string, ServiceBursts[]>(SETTINGS.map((s) => [s.name, []]));
  for (let i = 0; i < o.servicesPerSetting; i++) {
    for (const setting of SETTINGS) results.get(setting.name)?.push(await burstsOfAFreshService(setting, o));
  }
  const median = (values: number[]): number => percentile(sortedCopy(values), 0.5);
  const list = (values: number[]): string => values.map((v) => v.toFixed(0)).join(', ');
  const cpu = (pairs: TimedPair[]): string => `CPU over each pair: supervisor ${list(pairs.map((p) => p.supervisorMs))} ms, proxy workers ${list(pairs.map((p) => p.workersMs))} ms; STREAM events ${list(pairs.map((p) => p.streamEvents))}`;
  const answered = (pairs: TimedPair[]): string =>
    `${pairs.reduce((n, p) => n + p.pool.length, 0)}/${pairs.length * o.burst}, ${pairs.reduce((n, p) => n + p.direct.length, 0)}/${pairs.length * o.burst} and ${pairs.reduce((n, p) => n + (p.relay?.length ?? 0), 0)}/${pairs.length * o.burst} answered`;
  const relayAdded = (pairs: TimedPair[]): string => `the bare relay added median ${median(pairs.map(relayAddedAtP50)).toFixed(0)} ms (${list(pairs.map(relayAddedAtP50))})`;
  const figures: Figure[] = [];
  for (const setting of SETTINGS) {
    const services = results.get(setting.name) as ServiceBursts[];
    const firsts = services.map((s) => s.first);
    const laters = services.flatMap((s) => s.later);
    figures.push({
      name: `${setting.name}: the fresh service's first burst, added at p50 (each service; through the pool p50)`,
      value: `median ${median(firsts.map(addedAtP50)).toFixed(0)} ms (${list(firsts.map(addedAtP50))}; pool p50 ${list(firsts.map((p) => percentile(p.pool, 0.5)))} ms; ${relayAdded(firsts)}; ${answered(firsts)}; ${cpu(firsts)})`,
      limit: '',
      withinLimit: null,
    });
    figures.push({
      name: `${setting.name}: the ${o.laterBursts} bursts after it, added at p50 (every burst; through the pool p50)`,
      value: `median ${median(laters.map(addedAtP50)).toFixed(0)} ms (${list(laters.map(addedAtP50))}; pool p50 median ${median(laters.map((p) => percentile(p.pool, 0.5))).toFixed(0)} ms; ${relayAdded(laters)}; ${answered(laters)}; ${cpu(laters)})`,
      limit: '',
      withinLimit: null,
    });
  }
  return {
    title: "A fresh service's first burst, with and without the proxy workers' warm-up",
    method: [
      `The real service (the CLI, ${POOL_SIZE} instances on the private Tor network, the defaults: ${defaultProxyWorkers()} proxy worker${defaultProxyWorkers() > 1 ? 's' : ''} on this ${os.availableParallelism()}-core machine), started fresh ${o.servicesPerSetting} times for each setting (PROXY_WARM_UP at its default; PROXY_WARM_UP=0; the default, with every instance given a straight burst of ${o.burst} before the pool's first; the default, with ${QUIET_PAUSE_MS / 1000} s of quiet before the first burst, twice STREAM_EVENTS_QUIET_MS, after which the supervisor no longer follows tor's STREAM events; the default, settled first; PROXY_WARM_UP=${LONG_WARM_UP}; the default, aged first by ${AGE_REQUESTS} requests from ${AGE_CLIENTS} closed-loop clients through the pool, one session each, or straight to the instances, round robin; COLD_BURST_SETTINGS names the ones run), one service at a time, the settings alternated. CPU is each process's over the burst pair (from /proc).`,
      `Each: ready, every instance warmed straight with ${INSTANCE_WARM_UP_REQUESTS} requests (the tors' side alike for every burst), then its first proxied traffic is a burst of ${o.burst} connections started at once on a session new to the workers, through the pool, then the same burst straight to the session's instance; then ${o.laterBursts} more such pairs, each on another new session. After each pair, the same burst through a bare one-process Node relay (bench/bare-relay.ts: accept, connect, pipe; the client's SOCKS5 handshake passes through it) to the session's instance, one relay per instance started fresh with the service: the least that a Node process in the path adds to such a burst on this machine.`,
      `The first burst and the later ones differ only in what the service had run before: what the first adds beyond the later ones is what a fresh service pays once, and the settings tell its suspected parts apart (the workers' cold code, the tor's first burst of streams, the supervisor following STREAM events until its exits are confirmed and STREAM_EVENTS_QUIET_MS has passed). The supervisor's CPU includes the bench's own API calls around each pair (the session's instance, /metrics twice).`,
      `The machine's 1-minute load average was ${loadAtStart.toFixed(1)} at the start and ${(os.loadavg()[0] as number).toFixed(1)} at the end.`,
    ].join(' '),
    figures,
  };
}
