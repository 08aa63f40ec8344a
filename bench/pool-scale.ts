/**
 * A pool of 40 next to pools of 10 and 4 (issue 38): the real service on a private network with
 * an exit per instance, started, left idle, then loaded, one pool size at a time. What grows with
 * the pool and what must not: time to all ready, memory (the Node processes and each tor), the
 * supervisor's CPU when idle and per request, the events tor sends on the control connections,
 * and requests/s through the pool against straight to the same tors.
 */
import os from 'node:os';
import { startTestnet, type Testnet } from '../internal/testnet/index.js';
import type { InstanceView, PoolSummary } from '../shared/api/views.js';
import { defaultProxyWorkers } from '../shared/config/proxy-workers.js';
import { httpGetOverTunnel, openSocksTunnel, type SocksTunnelOptions } from '../test/support/clients/socks5-client.js';
import { startService, TEST_PROXY_TOKEN, type RunningService } from '../test/support/fixtures/service.js';
import { quietLogger } from '../test/support/fakes/quiet-logger.js';
import { serviceWorkers } from '../test/support/processes/inspection.js';
import { cpuMs, rssBytes } from './process-usage.js';
import { percentile, type BenchSection, type Figure } from './report.js';
import { setTimeout as sleep } from 'node:timers/promises';

export interface ScaleBenchOptions {
  sizes: readonly number[];
  /** Exit relays of the private network (one per instance of the largest pool keeps every exit the pool's own). */
  exits: number;
  /** The idle window, after the pool has settled. */
  idleMs: number;
  clients: number;
  roundMs: number;
  /** Rounds per path (through the pool, straight to the tors), alternated. */
  rounds: number;
}

export const FULL_SCALE_OPTIONS: ScaleBenchOptions = { sizes: [4, 10, 40], exits: 40, idleMs: 20_000, clients: 32, roundMs: 8_000, rounds: 2 };

/** After all instances are ready: exits confirmed, STREAM events followed only while needed (STREAM_EVENTS_QUIET_MS), start-up writes done. */
const SETTLE_MS = 8_000;
/** How often the bench asks whether every instance is ready (the resolution of the time to ready). */
const READY_POLL_MS = 100;
const READY_TIMEOUT_MS = 300_000;

interface SizeResult {
  size: number;
  readyMs: number;
  exitsInUse: number;
  rss: { supervisor: number; proxyWorkers: number; apiWorker: number; torPerInstance: number };
  idle: { supervisorMsPerMinute: number; proxyWorkersMsPerMinute: number; apiWorkerMsPerMinute: number; eventsPerSecond: number };
  load: {
    poolPerSecond: number;
    directPerSecond: number;
    poolLatencyP50: number;
    directLatencyP50: number;
    supervisorUsPerRequest: number;
    /** The same less what the supervisor spends idle over as long (its timers, the tors' events): what the requests themselves cost it. */
    supervisorAboveIdleUsPerRequest: number;
    proxyWorkersUsPerRequest: number;
    /** The pool's tor clients' CPU per request through the pool. */
    torUsPerRequest: number;
    /** The machine's 1-minute load average at the end of the load. */
    loadAverage: number;
    eventsPerRequest: number;
    failures: number;
  };
}

async function oneRequest(o: SocksTunnelOptions, host: string): Promise<boolean> {
  const t = await openSocksTunnel({ ...o, timeoutMs: 30_000 });
  if (t.kind !== 'open') return false;
  try {
    return (await httpGetOverTunnel(t.socket, host, '/', 30_000)).status === 200;
  } catch {
    return false;
  } finally {
    t.socket.destroy();
  }
}

async function closedLoop(clients: number, ms: number, options: (client: number) => SocksTunnelOptions, host: string): Promise<{ requests: number; failures: number; latencies: number[]; ms: number }> {
  const out = { requests: 0, failures: 0, latencies: [] as number[], ms: 0 };
  const started = performance.now();
  await Promise.all(
    Array.from({ length: clients }, async (_, client) => {
      while (performance.now() - started < ms) {
        const t0 = performance.now();
        if (await oneRequest(options(client), host)) {
          out.requests++;
          out.latencies.push(performance.now() - t0);
        } else {
          out.failures++;
        }
      }
    }),
  );
  out.ms = performance.now() - started;
  return out;
}

/** Sum of pool_tor_control_events_total over its event names. */
async function controlEvents(svc: RunningService): Promise<number> {
  const text = await (await svc.api('/metrics')).text();
  let total = 0;
  for (const line of text.split('\n')) {
    const m = /^pool_tor_control_events_total\{[^}]*\} (\d+)/.exec(line);
    if (m) total += Number(m[1]);
  }
  return total;
}

const sum = (values: number[]): number => values.reduce((a, b) => a + b, 0);

async function measureSize(net: Testnet, size: number, o: ScaleBenchOptions): Promise<SizeResult> {
  const spawned = performance.now();
  // The defaults, as an operator gets them (the test fixture's PROXY_WORKERS and SPAWN_STAGGER removed).
  const svc = await startService({ POOL_SIZE: String(size), PROXY_WORKERS: undefined, SPAWN_STAGGER: undefined, LOG_LEVEL: 'warn' }, { testnet: net });
  try {
    let bearer: string | null = null;
    let readyMs = 0;
    for (;;) {
      if (performance.now() - spawned > READY_TIMEOUT_MS) throw new Error(`pool of ${size}: not all ready within ${READY_TIMEOUT_MS} ms`);
      try {
        bearer ??= await svc.login();
        const pool = (await (await svc.api('/api/pool', { bearer })).json()) as PoolSummary;
        if (pool.ready >= size) {
          readyMs = performance.now() - spawned;
          break;
        }
      } catch {
        // the API is not up yet
      }
      await sleep(READY_POLL_MS);
    }
    await sleep(SETTLE_MS);
    const instances = (await (await svc.api('/api/instances', { bearer })).json()) as InstanceView[];
    const workers = serviceWorkers(svc.pid);
    const exits = new Set(instances.map((i) => i.exit_ip).filter((ip) => ip !== ''));
    const rssMiB = (pid: number): number => (rssBytes(pid) ?? 0) / 2 ** 20;
    const rss = {
      supervisor: rssMiB(svc.pid),
      proxyWorkers: sum(workers.proxy.map(rssMiB)),
      apiWorker: sum(workers.api.map(rssMiB)),
      torPerInstance: sum(instances.map((i) => rssMiB(i.pid))) / instances.length,
    };

    const cpuOf = (pids: number[]): number => sum(pids.map(cpuMs));
    const idleBefore = { sup: cpuMs(svc.pid), proxy: cpuOf(workers.proxy), api: cpuOf(workers.api), events: await controlEvents(svc) };
    const idleStarted = performance.now();
    await sleep(o.idleMs);
    const idleMs = performance.now() - idleStarted;
    const perMinute = (ms: number): number => (ms * 60_000) / idleMs;
    const idle = {
      supervisorMsPerMinute: perMinute(cpuMs(svc.pid) - idleBefore.sup),
      proxyWorkersMsPerMinute: perMinute(cpuOf(workers.proxy) - idleBefore.proxy),
      apiWorkerMsPerMinute: perMinute(cpuOf(workers.api) - idleBefore.api),
      eventsPerSecond: (((await controlEvents(svc)) - idleBefore.events) * 1000) / idleMs,
    };

    const host = `whoami.testnet:${net.whoami.port}`;
    const target = { host: 'whoami.testnet', targetPort: net.whoami.port };
    const sockets = instances.map((i) => i.socks_addr.replace(/^unix:/, ''));
    let spread = 0;
    const poolOptions = (client: number): SocksTunnelOptions => ({ ...target, port: svc.socksPort, username: `scale-${client}`, password: TEST_PROXY_TOKEN });
    const directOptions = (): SocksTunnelOptions => ({ ...target, proxyPath: sockets[spread++ % sockets.length] as string });
    // Warm-up: every client's session placed, circuits used on every instance.
    await closedLoop(o.clients, 2_000, poolOptions, host);
    await closedLoop(o.clients, 2_000, directOptions, host);
    const pool = { requests: 0, failures: 0, ms: 0, latencies: [] as number[], supMs: 0, proxyMs: 0, torMs: 0, events: 0 };
    const torPids = instances.map((i) => i.pid);
    const direct = { requests: 0, failures: 0, ms: 0, latencies: [] as number[] };
    for (let round = 0; round < o.rounds; round++) {
      for (const path of round % 2 === 0 ? (['pool', 'direct'] as const) : (['direct', 'pool'] as const)) {
        if (path === 'direct') {
          const r = await closedLoop(o.clients, o.roundMs, directOptions, host);
          Object.assign(direct, { requests: direct.requests + r.requests, failures: direct.failures + r.failures, ms: direct.ms + r.ms, latencies: [...direct.latencies, ...r.latencies] });
          continue;
        }
        const before = { sup: cpuMs(svc.pid), proxy: cpuOf(workers.proxy), tor: cpuOf(torPids), events: await controlEvents(svc) };
        const r = await closedLoop(o.clients, o.roundMs, poolOptions, host);
        pool.supMs += cpuMs(svc.pid) - before.sup;
        pool.proxyMs += cpuOf(workers.proxy) - before.proxy;
        pool.torMs += cpuOf(torPids) - before.tor;
        pool.events += (await controlEvents(svc)) - before.events;
        Object.assign(pool, { requests: pool.requests + r.requests, failures: pool.failures + r.failures, ms: pool.ms + r.ms, latencies: [...pool.latencies, ...r.latencies] });
      }
    }
    const sortedLatencies = (v: number[]): number[] => [...v].sort((a, b) => a - b);
    return {
      size,
      readyMs,
      exitsInUse: exits.size,
      rss,
      idle,
      load: {
        poolPerSecond: (pool.requests * 1000) / pool.ms,
        directPerSecond: (direct.requests * 1000) / direct.ms,
        poolLatencyP50: percentile(sortedLatencies(pool.latencies), 0.5),
        directLatencyP50: percentile(sortedLatencies(direct.latencies), 0.5),
        supervisorUsPerRequest: (pool.supMs * 1000) / Math.max(1, pool.requests),
        supervisorAboveIdleUsPerRequest: ((pool.supMs - (idle.supervisorMsPerMinute * pool.ms) / 60_000) * 1000) / Math.max(1, pool.requests),
        torUsPerRequest: (pool.torMs * 1000) / Math.max(1, pool.requests),
        loadAverage: os.loadavg()[0] as number,
        proxyWorkersUsPerRequest: (pool.proxyMs * 1000) / Math.max(1, pool.requests),
        eventsPerRequest: pool.events / Math.max(1, pool.requests),
        failures: pool.failures + direct.failures,
      },
    };
  } finally {
    await svc.stop();
  }
}

export async function benchPoolScale(o: ScaleBenchOptions = FULL_SCALE_OPTIONS): Promise<BenchSection> {
  const net = await startTestnet({ exits: o.exits, log: quietLogger() });
  const results: SizeResult[] = [];
  let usableMs: number;
  try {
    const t0 = performance.now();
    await net.waitUntilUsable();
    usableMs = net.usableAfterMs ?? performance.now() - t0;
    // A first client right after the network turns usable can wait a voting interval
    // (TESTNET-NOTES.md): an untimed pool of 1 goes first.
    const warmUp = await startService({ POOL_SIZE: '1', LOG_LEVEL: 'warn' }, { testnet: net });
    try {
      await warmUp.waitReady(1, READY_TIMEOUT_MS);
    } finally {
      await warmUp.stop();
    }
    for (const size of o.sizes) results.push(await measureSize(net, size, o));
  } finally {
    await net.stop();
  }
  return report(o, results, usableMs);
}

function report(o: ScaleBenchOptions, results: SizeResult[], usableMs: number): BenchSection {
  const base = results[0] as SizeResult;
  const row = (name: string, value: (r: SizeResult) => string, limit = '', within: boolean | null = null): Figure => ({
    name,
    value: results.map((r) => `${r.size}: ${value(r)}`).join('; '),
    limit,
    withinLimit: within,
  });
  const ratio = (a: number, b: number): string => `${(a / b).toFixed(2)} ×`;
  const largest = results.at(-1) as SizeResult;
  const flat = (f: (r: SizeResult) => number): boolean => f(largest) <= 1.5 * f(base);
  return {
    title: `A pool of ${largest.size}: what grows with the pool`,
    method: [
      `The real service (the CLI, the defaults: ${defaultProxyWorkers()} proxy worker${defaultProxyWorkers() > 1 ? 's' : ''} on this machine, SPAWN_STAGGER's 250 ms between two instances' starts; WARM_SPARES=0, the tests' setting, so a pool of N runs N tors) on a private Tor network of ${o.exits} exits (usable after ${(usableMs / 1000).toFixed(0)} s; an untimed pool of 1 first), one pool size at a time: ${o.sizes.join(', ')} instances.`,
      `Time to all ready: from spawning the service to GET /api/pool counting every instance ready (polled every ${READY_POLL_MS} ms). Then ${SETTLE_MS / 1000} s to settle, memory (RSS) read, and ${o.idleMs / 1000} s idle: CPU time of each process (from /proc) per minute, and the tors' control events per second (pool_tor_control_events_total).`,
      `Then the load: ${o.clients} clients in a closed loop (connect, SOCKS5, CONNECT to the whoami server, GET, close; through the pool one session each, straight to the tors spread over every instance's socket), ${o.rounds} rounds of ${o.roundMs / 1000} s per path, alternated, after 2 s of each; CPU per request through the pool from /proc.`,
    ].join(' '),
    figures: [
      row('time from spawn to all instances ready', (r) => `${(r.readyMs / 1000).toFixed(1)} s (${ratio(r.readyMs, base.readyMs)} the pool of ${base.size})`),
      row('distinct exit IPs in use once settled', (r) => `${r.exitsInUse}`),
      row('RSS: supervisor / proxy workers / API worker', (r) => `${r.rss.supervisor.toFixed(0)} / ${r.rss.proxyWorkers.toFixed(0)} / ${r.rss.apiWorker.toFixed(0)} MiB`),
      row('RSS per tor instance (mean)', (r) => `${r.rss.torPerInstance.toFixed(1)} MiB`),
      row(
        'idle CPU per minute: supervisor / proxy workers / API worker',
        (r) => `${(r.idle.supervisorMsPerMinute / 1000).toFixed(2)} / ${(r.idle.proxyWorkersMsPerMinute / 1000).toFixed(2)} / ${(r.idle.apiWorkerMsPerMinute / 1000).toFixed(2)} s (supervisor ${((100 * r.idle.supervisorMsPerMinute) / 60_000).toFixed(2)} % of a core)`,
      ),
      row('control events per second, idle (all instances)', (r) => `${r.idle.eventsPerSecond.toFixed(1)} (${(r.idle.eventsPerSecond / r.size).toFixed(2)} per instance)`),
      row(
        'supervisor CPU per request through the pool',
        (r) => `${r.load.supervisorUsPerRequest.toFixed(0)} µs`,
        `≤ 1.5 × the pool of ${base.size} (flat)`,
        flat((r) => r.load.supervisorUsPerRequest),
      ),
      row('supervisor CPU per request through the pool, less its idle rate over as long', (r) => `${r.load.supervisorAboveIdleUsPerRequest.toFixed(0)} µs`),
      row('the pool\'s tor clients\' CPU per request through the pool', (r) => `${r.load.torUsPerRequest.toFixed(0)} µs`),
      row('the machine\'s 1-minute load average at the end of the load', (r) => r.load.loadAverage.toFixed(1)),
      row('proxy workers CPU per request', (r) => `${r.load.proxyWorkersUsPerRequest.toFixed(0)} µs`, `≤ 1.5 × the pool of ${base.size} (flat)`, flat((r) => r.load.proxyWorkersUsPerRequest)),
      row('control events per request through the pool', (r) => `${r.load.eventsPerRequest.toFixed(2)}`),
      row(
        'requests/s through the pool against straight to the same tors (latency p50)',
        (r) => `${r.load.poolPerSecond.toFixed(0)}/s vs ${r.load.directPerSecond.toFixed(0)}/s = ${(r.load.poolPerSecond / r.load.directPerSecond).toFixed(2)} × (${r.load.poolLatencyP50.toFixed(0)} / ${r.load.directLatencyP50.toFixed(0)} ms)${r.load.failures > 0 ? `, ${r.load.failures} failed` : ''}`,
        '≥ 0.97 × direct',
        largest.load.poolPerSecond >= 0.97 * largest.load.directPerSecond,
      ),
    ],
  };
}
