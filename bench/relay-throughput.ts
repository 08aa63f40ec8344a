/**
 * Relay throughput on a fast local backend: straight to the backend's SOCKS port, through a
 * bare one-hop Node relay (the limit for any Node relay), and through exitpool with 1 and 2
 * proxy workers. Every server runs in its own process; the client downloads from a source
 * behind the backend and counts every byte.
 */
import { startChildServer, type ChildServer } from './child-server.js';
import { DOWNLOAD_REQUEST_BYTES, download } from './download-source.js';
import { cpuMs } from './process-usage.js';
import { startProxyHarness, type ProxyHarness } from './proxy-harness.js';
import { type BenchSection, type Figure } from './report.js';
import { openSocksTunnelOrThrow, type SocksCredentials } from '../test/support/clients/socks5-client.js';

/** DESIGN.md: relay throughput through the pool ≥ this × a bare one-hop Node relay. */
const POOL_VS_BARE_RELAY_BUDGET = 0.9;

export interface RelayBenchOptions {
  /** Bytes downloaded per measured case (split evenly over the streams). */
  totalBytes: number;
  /** Measured rounds per case; the median is checked against the budget. Cases are interleaved within a round. */
  rounds: number;
  streamCounts: number[];
}

export const FULL_RELAY_OPTIONS: RelayBenchOptions = { totalBytes: 200e6, rounds: 9, streamCounts: [1, 8] };

interface RelayPath {
  name: string;
  port: number;
  /** The relaying processes (bare relay or proxy workers), whose CPU time per MB is compared. */
  relayPids: () => number[];
  credentials?: (stream: number) => SocksCredentials;
  harness?: ProxyHarness;
}

export interface Throughput {
  bytes: number;
  ms: number;
}

/** Opens `streams` tunnels to the source at once and downloads totalBytes over them; wall time from the first connect to the last byte. */
export async function measureDownload(
  /** The SOCKS5 proxy: a TCP port on loopback, or a Unix socket path (a tor instance's SocksPort). */
  proxy: number | string,
  target: { host: string; port: number },
  totalBytes: number,
  streams: number,
  credentials?: (stream: number) => SocksCredentials,
): Promise<Throughput> {
  const per = Math.floor(totalBytes / streams);
  const started = performance.now();
  await Promise.all(
    Array.from({ length: streams }, async (_, i) => {
      const tunnel = await openSocksTunnelOrThrow({
        ...(typeof proxy === 'number' ? { port: proxy } : { proxyPath: proxy }),
        host: target.host,
        targetPort: target.port,
        timeoutMs: 60_000,
        ...(credentials ? credentials(i) : {}),
      });
      await download(tunnel.socket, per);
    }),
  );
  return { bytes: per * streams, ms: performance.now() - started };
}

export function mbPerSecond(t: Throughput): number {
  return t.bytes / 1e6 / (t.ms / 1000);
}

function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
}

export async function benchRelayThroughput(options: RelayBenchOptions = FULL_RELAY_OPTIONS): Promise<BenchSection> {
  const started: { stop(): Promise<void> }[] = [];
  try {
    const source: ChildServer = await startChildServer('download-source');
    started.push(source);
    const backend = await startChildServer('socks-backend');
    started.push(backend);
    const relay = await startChildServer('bare-relay', [String(backend.port)]);
    started.push(relay);
    const backendAddress = { host: '127.0.0.1', port: backend.port };
    const pool1 = await startProxyHarness({ workers: 1, backend: backendAddress });
    started.push(pool1);
    const pool2 = await startProxyHarness({ workers: 2, backend: backendAddress });
    started.push(pool2);
    const paths: RelayPath[] = [
      { name: 'direct to the backend', port: backend.port, relayPids: () => [] },
      { name: 'bare Node relay', port: relay.port, relayPids: () => [relay.pid] },
      { name: 'exitpool, 1 proxy worker', port: pool1.socksPort, relayPids: () => pool1.workerPids(), credentials: (i) => pool1.credentials(`bench-${i}`), harness: pool1 },
      { name: 'exitpool, 2 proxy workers', port: pool2.socksPort, relayPids: () => pool2.workerPids(), credentials: (i) => pool2.credentials(`bench-${i}`), harness: pool2 },
    ];
    const target = { host: '127.0.0.1', port: source.port };
    const expected = new Map<ProxyHarness, { closes: number; down: number; up: number }>();
    const account = (p: RelayPath, streams: number, bytes: number): void => {
      if (!p.harness) return;
      const e = expected.get(p.harness) ?? { closes: 0, down: 0, up: 0 };
      e.closes += streams;
      e.down += bytes;
      e.up += streams * DOWNLOAD_REQUEST_BYTES;
      expected.set(p.harness, e);
    };

    const figures: Figure[] = [];
    for (const streams of options.streamCounts) {
      // Warm-up: JIT, socket buffers, the workers' first connections.
      for (const p of paths) {
        const w = await measureDownload(p.port, target, Math.min(options.totalBytes / 2, 100e6), streams, p.credentials);
        account(p, streams, w.bytes);
      }
      const results = new Map<RelayPath, number[]>(paths.map((p) => [p, []]));
      const relayCpuMs = new Map<RelayPath, number>(paths.map((p) => [p, 0]));
      const processCpu = (p: RelayPath): number => p.relayPids().reduce((sum, pid) => sum + cpuMs(pid), 0);
      for (let round = 0; round < options.rounds; round++) {
        // Rotate the order so no path always runs first (or last) in a round.
        const order = paths.map((_, i) => paths[(i + round) % paths.length] as RelayPath);
        for (const p of order) {
          const cpuBefore = processCpu(p);
          const t = await measureDownload(p.port, target, options.totalBytes, streams, p.credentials);
          relayCpuMs.set(p, (relayCpuMs.get(p) as number) + processCpu(p) - cpuBefore);
          account(p, streams, t.bytes);
          results.get(p)?.push(mbPerSecond(t));
        }
      }
      const mbRelayed = (options.totalBytes * options.rounds) / 1e6;
      const cpuPerMb = (p: RelayPath): number => (relayCpuMs.get(p) as number) / mbRelayed;
      const bare = median(results.get(paths[1] as RelayPath) as number[]);
      const label = `${streams} stream${streams > 1 ? 's' : ''}`;
      for (const p of paths) {
        const runs = results.get(p) as number[];
        const m = median(runs);
        const isPool = p.harness !== undefined;
        figures.push({
          name: `${label}: ${p.name}`,
          value: `${m.toFixed(0)} MB/s (best ${Math.max(...runs).toFixed(0)})${isPool ? `, ${(m / bare).toFixed(2)} × bare relay` : ''}`,
          limit: isPool ? `≥ ${POOL_VS_BARE_RELAY_BUDGET} × bare relay (${(bare * POOL_VS_BARE_RELAY_BUDGET).toFixed(0)} MB/s)` : '',
          withinLimit: isPool ? m >= bare * POOL_VS_BARE_RELAY_BUDGET : null,
        });
      }
      const bareCpu = cpuPerMb(paths[1] as RelayPath);
      figures.push({
        name: `${label}: CPU time of the relaying process(es) per MB`,
        value: paths
          .slice(1)
          .map((p) => `${p.name} ${cpuPerMb(p).toFixed(2)} ms${p.harness ? ` (${(cpuPerMb(p) / bareCpu).toFixed(2)} ×)` : ''}`)
          .join(', '),
        limit: '',
        withinLimit: null,
      });
    }

    // Exact accounting: every stream through the pool reported once, with its exact byte counts.
    let exact = true;
    const detail: string[] = [];
    for (const [h, e] of expected) {
      await h.waitForCloses(e.closes).catch(() => undefined);
      const t = h.tally;
      const ok = t.closes === e.closes && t.ok === e.closes && t.bytesDown === e.down && t.bytesUp === e.up && t.routes === e.closes;
      exact &&= ok;
      detail.push(`${t.closes}/${e.closes} closes, ${t.bytesDown}/${e.down} bytes down`);
    }
    figures.push({ name: 'accounting reported back by the workers', value: detail.join('; '), limit: 'exact', withinLimit: exact });

    return {
      title: 'Relay throughput on a fast local backend',
      method: [
        `Downloads of ${(options.totalBytes / 1e6).toFixed(0)} MB per case (split evenly over the streams) from a source server, through a lean SOCKS5 backend standing in for tor (bench/lean-socks-backend.ts);`,
        'the client goes straight to the backend, through a bare one-hop Node relay (a `net` server that only pipes: the limit for a Node relay), or through the real proxy workers (workers/main.js via WorkerManager, real token check, routes answered by an in-bench supervisor).',
        'Source, backend, relay and each worker are separate processes, as in production; everything shares the 2 cores with the client.',
        `Median of ${options.rounds} rounds (best in brackets), paths interleaved and their order rotated every round, after a warm-up per path. Single runs vary by ±25 % on a shared 2-core machine, so only medians of interleaved rounds are compared. With 2 workers the kernel hands each stream to either one.`,
        'MB = 10⁶ bytes; the client counts every byte. Checked once while writing this benchmark, a syscall trace (strace -c) of the bare relay and of a proxy worker over the same 300 MB download showed the same number of read and write calls (about 4,600 each): once the tunnel is up the worker does what the bare relay does, and its own code is 1–2 % of its busy time (profile section). The CPU row gives the CPU time each relaying process spent per MB. On 2 cores shared by four busy processes both rows depend on which processes share a core for the run: two runs of the same code gave 0.92–1.05 and 0.77–0.88 × bare relay, the CPU per MB moves between about 0.9 and 1.75 × the bare relay\'s from run to run, and pinning the processes to fixed cores did not steady either and lowered every path.',
      ].join(' '),
      figures,
    };
  } finally {
    for (const s of started.reverse()) await s.stop();
  }
}
