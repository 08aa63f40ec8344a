/**
 * Memory and file descriptors per idle proxied connection: 10,000 connections held open
 * through the proxy workers (each finished its SOCKS5 handshake and was dialled through to
 * the backend), then nothing. A bare one-hop Node relay holding idle connections the same way
 * is the reference for what any Node relay needs.
 */
import type net from 'node:net';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { startChildServer } from './child-server.js';
import { DISCARD_HOST } from './lean-socks-backend.js';
import { requestMemoryReport, type MemoryReport } from './memory-report.js';
import { fdCount, fdLimit, raiseFdLimit } from './process-usage.js';
import { startProxyHarness } from './proxy-harness.js';
import type { BenchSection } from './report.js';
import { openSocksTunnelOrThrow, type SocksCredentials } from '../test/support/clients/socks5-client.js';

const here = path.dirname(fileURLToPath(import.meta.url));

/** DESIGN.md: 10,000 idle proxied connections held across the workers. */
const DESIGN_IDLE_CONNECTIONS = 10_000;
/** A tunnel is one client socket and one upstream socket in the relaying process. */
const EXPECTED_FDS_PER_CONNECTION = 2;
/** Descriptors kept free in every process for everything else it opens. */
const FD_HEADROOM = 400;
const OPEN_IN_PARALLEL = 200;
const WARM_UP_CONNECTIONS = 500;
/** The bare relay is one process: 2 descriptors per connection must fit its limit. */
const BARE_RELAY_CONNECTIONS = 5_000;

export interface IdleBenchOptions {
  connections: number;
  workers: number;
}

export const FULL_IDLE_OPTIONS: IdleBenchOptions = { connections: DESIGN_IDLE_CONNECTIONS, workers: 2 };

const sleep = (msec: number): Promise<void> => new Promise((r) => setTimeout(r, msec));

const GC_PRELOAD = (): string[] => ['--expose-gc', '--import', pathToFileURL(path.join(here, 'gc-on-signal.js')).href];

interface Reading extends MemoryReport {
  fds: number;
}

interface IdleResult {
  held: number;
  perProcess: number[];
  rssPerConnection: number;
  heapPerConnection: number;
  buffersPerConnection: number;
  fdsPerConnection: number;
  rssAll: number[];
  openMs: number;
  leftFds: number;
  stoppedEarly: string;
}

/**
 * Opens `wanted` idle tunnels through `proxyPort` and reads the relaying processes before
 * (after a warm-up) and with all open, then closes them and checks the descriptors return.
 */
async function holdIdle(proxyPort: number, pids: number[], wanted: number, credentials?: (i: number) => SocksCredentials): Promise<IdleResult> {
  const open = (i: number): Promise<net.Socket> =>
    openSocksTunnelOrThrow({ port: proxyPort, host: DISCARD_HOST, targetPort: 9, timeoutMs: 30_000, ...(credentials ? credentials(i) : {}) }).then((t) => t.socket);
  const read = (): Promise<Reading[]> => Promise.all(pids.map(async (pid) => ({ ...(await requestMemoryReport(pid)), fds: fdCount(pid) })));
  const limit = Math.min(...pids.map((pid) => fdLimit(pid).soft));
  const held: net.Socket[] = [];
  try {
    for (const s of await Promise.all(Array.from({ length: WARM_UP_CONNECTIONS }, (_, i) => open(i)))) s.destroy();
    await sleep(1000);
    const before = await read();

    // Open in batches; stop early rather than let a process run out of descriptors (the kernel
    // shares connections between the workers, so one may get more than its share).
    let stoppedEarly = '';
    const started = performance.now();
    while (held.length < wanted) {
      const base = held.length;
      held.push(...(await Promise.all(Array.from({ length: Math.min(OPEN_IN_PARALLEL, wanted - base) }, (_, i) => open(base + i)))));
      const busiest = Math.max(...pids.map((pid) => fdCount(pid)));
      if (held.length < wanted && busiest + OPEN_IN_PARALLEL * EXPECTED_FDS_PER_CONNECTION + FD_HEADROOM > limit) {
        stoppedEarly = `stopped at ${held.length}: a relaying process holds ${busiest} of its ${limit} descriptors`;
        break;
      }
    }
    const openMs = performance.now() - started;
    await sleep(1000);
    const after = await read();
    const n = held.length;
    const delta = (k: keyof Reading): number => after.reduce((s, a, i) => s + a[k] - (before[i] as Reading)[k], 0);
    for (const s of held.splice(0)) s.destroy();
    await sleep(1500);
    const closed = await read();
    return {
      held: n,
      perProcess: after.map((a, i) => Math.round((a.fds - (before[i] as Reading).fds) / EXPECTED_FDS_PER_CONNECTION)),
      rssPerConnection: delta('rss') / n,
      heapPerConnection: delta('heapUsed') / n,
      buffersPerConnection: delta('arrayBuffers') / n,
      fdsPerConnection: delta('fds') / n,
      rssAll: after.map((a) => a.rss),
      openMs,
      leftFds: closed.reduce((s, c, i) => s + c.fds - (before[i] as Reading).fds, 0),
      stoppedEarly,
    };
  } finally {
    for (const s of held) s.destroy();
  }
}

const kib = (b: number): string => `${(b / 1024).toFixed(1)} KiB`;

export async function benchIdleConnections(options: IdleBenchOptions = FULL_IDLE_OPTIONS): Promise<BenchSection> {
  // The bench process holds one socket per connection, each worker two per connection it got.
  const limit = raiseFdLimit(options.connections + FD_HEADROOM);
  const started: { stop(): Promise<void> }[] = [];
  try {
    const backend = await startChildServer('socks-backend');
    started.push(backend);
    const relay = await startChildServer('bare-relay', [String(backend.port)], GC_PRELOAD());
    started.push(relay);
    const pool = await startProxyHarness({ workers: options.workers, backend: { host: '127.0.0.1', port: backend.port }, execArgv: GC_PRELOAD() });
    started.push(pool);

    // The bench process holds one descriptor per client connection: never ask for more than it may open.
    const wanted = Math.min(options.connections, limit.soft - FD_HEADROOM);
    const bare = await holdIdle(relay.port, [relay.pid], Math.min(wanted, BARE_RELAY_CONNECTIONS, Math.floor((limit.soft - FD_HEADROOM) / EXPECTED_FDS_PER_CONNECTION)));
    const r = await holdIdle(pool.socksPort, pool.workerPids(), wanted, (i) => pool.credentials(`idle-${i % 100}`));
    await pool.waitForCloses(pool.tally.routes, 60_000).catch(() => undefined);
    const exact = pool.tally.closes === pool.tally.routes && pool.tally.failed === 0 && pool.tally.routes === WARM_UP_CONNECTIONS + r.held;

    return {
      title: 'Idle proxied connections',
      method: [
        `${r.held.toLocaleString('en-US')} SOCKS5 connections opened through ${options.workers} proxy workers (${OPEN_IN_PARALLEL} handshakes at a time, real token check), each dialled through to the lean backend, then left idle; the backend answers them itself, so it holds one socket each.`,
        `For reference, ${bare.held.toLocaleString('en-US')} idle connections through the bare one-hop Node relay (one process, so fewer: 2 descriptors each).`,
        'Memory is the resident set of the relaying processes after a full garbage collection in each (they run with --expose-gc and bench/gc-on-signal.ts, which also reports the live heap), after a warm-up and with all connections open; the difference is divided by the connections.',
        'RSS also holds heap space V8 keeps reserved after the burst of handshakes, so it is the upper figure and the live heap the lower one. Kernel socket buffers are not in a process\'s RSS and are not counted.',
        `Open files: the bench raised its soft limit to ${limit.soft} (hard limit ${limit.hard}; raising the hard limit needs CAP_SYS_RESOURCE) and every child inherits it; one worker would need 2 × 10,000 descriptors plus its own, so the 10,000 are spread over ${options.workers} workers, as DESIGN.md states them ("across the workers").`,
        r.stoppedEarly ? `The run ${r.stoppedEarly}.` : '',
      ]
        .filter(Boolean)
        .join(' '),
      figures: [
        { name: 'idle connections held', value: `${r.held.toLocaleString('en-US')} (per worker: ${r.perProcess.join(' + ')})`, limit: DESIGN_IDLE_CONNECTIONS.toLocaleString('en-US'), withinLimit: r.held >= DESIGN_IDLE_CONNECTIONS },
        { name: 'memory per idle connection, RSS', value: `${kib(r.rssPerConnection)} (${((r.rssPerConnection * r.held) / 2 ** 20).toFixed(1)} MiB for all)`, limit: `bounded; bare Node relay ${kib(bare.rssPerConnection)}`, withinLimit: null },
        { name: 'memory per idle connection, live heap', value: `${kib(r.heapPerConnection)} (Buffers outside the heap ${kib(r.buffersPerConnection)})`, limit: `bare Node relay ${kib(bare.heapPerConnection)}`, withinLimit: null },
        { name: 'worker RSS with all connections open', value: r.rssAll.map((b) => `${(b / 2 ** 20).toFixed(1)} MiB`).join(' + '), limit: '', withinLimit: null },
        { name: 'file descriptors per idle connection (workers)', value: r.fdsPerConnection.toFixed(2), limit: `${EXPECTED_FDS_PER_CONNECTION} (client + upstream)`, withinLimit: Math.abs(r.fdsPerConnection - EXPECTED_FDS_PER_CONNECTION) < 0.05 },
        { name: 'time to open them all', value: `${(r.openMs / 1000).toFixed(1)} s (${Math.round((r.held / r.openMs) * 1000)}/s)`, limit: '', withinLimit: null },
        { name: "workers' descriptors after closing them all", value: `${r.leftFds >= 0 ? '+' : ''}${r.leftFds} vs before`, limit: '0 (nothing leaks)', withinLimit: r.leftFds <= 0 },
        { name: 'accounting reported back by the workers', value: `${pool.tally.routes} routed, ${pool.tally.closes} closes, ${pool.tally.failed} failed`, limit: 'every connection closed once, none failed', withinLimit: exact },
      ],
    };
  } finally {
    for (const s of started.reverse()) await s.stop();
  }
}
