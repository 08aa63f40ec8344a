/**
 * Relay throughput on the private Tor network: one large download through a tor instance,
 * straight to its SOCKS port vs through exitpool's proxy worker in front of the same
 * instance (same circuit: both arrive from 127.0.0.1 without credentials, so tor isolates
 * them together).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { TorInstance } from '../supervisor/tor/instance.js';
import { quietLogger } from '../test/support/fakes/quiet-logger.js';
import { sharedTestnet } from '../test/support/fixtures/testnet.js';
import { startChildServer } from './child-server.js';
import { freePorts } from '../test/support/network/free-ports.js';
import { cpuMs, machineCpuMs } from './process-usage.js';
import { startProxyHarness } from './proxy-harness.js';
import { mbPerSecond, measureDownload } from './relay-throughput.js';
import type { BenchSection } from './report.js';

/** DESIGN.md: on the tor path, throughput through the pool ≥ this × direct. */
const POOL_VS_DIRECT_TOR_BUDGET = 0.97;
/** The exits resolve every *.testnet name to 127.0.0.1 (internal/testnet DNS responder). */
const SOURCE_HOSTNAME = 'source.testnet';

export interface TorRelayBenchOptions {
  bytes: number;
  /** Each round downloads once per path; the order alternates (ABBA) so drift hits both. */
  rounds: number;
}

export const FULL_TOR_RELAY_OPTIONS: TorRelayBenchOptions = { bytes: 32e6, rounds: 4 };

function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
}

export async function benchTorRelay(options: TorRelayBenchOptions = FULL_TOR_RELAY_OPTIONS): Promise<BenchSection> {
  const net = await sharedTestnet();
  const started: { stop(): Promise<void> }[] = [];
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-bench-tor-'));
  try {
    const source = await startChildServer('download-source');
    started.push(source);
    const [socksPort, controlPort] = (await freePorts(2)) as [number, number];
    const instance = new TorInstance({
      index: 0,
      dataDir,
      socksPort,
      controlPort,
      torBinary: net.torBinary,
      defaultsTorrc: net.defaultsTorrc,
      extraTorrcLines: net.clientTorrcLines,
      env: { ...process.env, ...net.clientEnvironment },
      log: quietLogger(),
    });
    started.push(instance);
    await instance.start();
    await instance.whenReady(120_000);
    // The instance's SocksPort is a Unix socket in its data directory (socksAddr `unix:<path>`).
    const socksPath = instance.socksAddr.replace(/^unix:/, '');
    const pool = await startProxyHarness({ workers: 1, backend: { host: '127.0.0.1', port: socksPort, path: socksPath } });
    started.push(pool);

    const target = { host: SOURCE_HOSTNAME, port: source.port };
    const direct = (bytes: number) => measureDownload(socksPath, target, bytes, 1);
    const viaPool = (bytes: number) => measureDownload(pool.socksPort, target, bytes, 1, () => pool.credentials('tor-relay'));
    // Warm-up: builds the circuit both paths then share.
    await direct(2e6);
    await viaPool(2e6);

    const d: number[] = [];
    const p: number[] = [];
    // Where the CPU goes during the pool's downloads: every relay of the private network runs on
    // this machine, so CPU the worker uses is CPU the tors do not get.
    const workerPid = pool.workerPids()[0] as number;
    const torPid = instance.pid as number;
    let workerMs = 0;
    const idleShare: Record<'direct' | 'pool', number[]> = { direct: [], pool: [] };
    // CPU per path, summed over the rounds, from each process's own counters: the instance's tor
    // and this process (the client and the stand-in supervisor).
    const cpu: Record<'direct' | 'pool', { tor: number; bench: number }> = {
      direct: { tor: 0, bench: 0 },
      pool: { tor: 0, bench: 0 },
    };
    const benchCpuMs = (): number => {
      const u = process.cpuUsage();
      return (u.user + u.system) / 1000;
    };
    for (let round = 0; round < options.rounds; round++) {
      const order = round % 2 === 0 ? (['direct', 'pool'] as const) : (['pool', 'direct'] as const);
      for (const which of order) {
        const machineBefore = machineCpuMs();
        const torBefore = cpuMs(torPid);
        const benchBefore = benchCpuMs();
        const workerBefore = cpuMs(workerPid);
        if (which === 'direct') {
          d.push(mbPerSecond(await direct(options.bytes)));
        } else {
          p.push(mbPerSecond(await viaPool(options.bytes)));
        }
        const workerUsed = cpuMs(workerPid) - workerBefore;
        if (which === 'pool') workerMs += workerUsed;
        const machineAfter = machineCpuMs();
        const idle = machineAfter.idle - machineBefore.idle;
        const busy = machineAfter.busy - machineBefore.busy;
        idleShare[which].push(idle / (idle + busy));
        cpu[which].tor += cpuMs(torPid) - torBefore;
        cpu[which].bench += benchCpuMs() - benchBefore;
      }
    }
    const mbPerPath = (options.bytes * options.rounds) / 1e6;
    const workerMsPerMb = workerMs / mbPerPath;
    const perMb = (which: 'direct' | 'pool'): string =>
      `instance tor ${(cpu[which].tor / mbPerPath).toFixed(1)}, client ${(cpu[which].bench / mbPerPath).toFixed(1)}${which === 'pool' ? `, worker ${workerMsPerMb.toFixed(1)}` : ''}`;
    const medianDirect = median(d);
    const medianPool = median(p);
    await pool.waitForCloses(options.rounds + 1).catch(() => undefined);
    const expectedDown = options.bytes * options.rounds + 2e6;
    const exact = pool.tally.closes === options.rounds + 1 && pool.tally.bytesDown === expectedDown && pool.tally.failed === 0;
    return {
      title: 'Relay throughput on the private Tor network',
      method: [
        `One download of ${(options.bytes / 1e6).toFixed(0)} MB at a time from a source server on 127.0.0.1, reached by the exits as ${SOURCE_HOSTNAME} (the private network's DNS answers 127.0.0.1),`,
        'through one tor instance (TorInstance, as the pool runs it) straight to its SOCKS port, or through a real proxy worker in front of the same instance (in-bench supervisor routing to it).',
        'Both paths share one circuit (same client address, no credentials forwarded, so tor does not isolate them).',
        `${options.rounds} rounds with the order alternating, after a warm-up each; the medians are compared (single downloads through tor vary by ±20 % either way). MB = 10⁶ bytes.`,
        'The machine stays mostly idle during these downloads (idle share below): throughput through tor is bound by its flow control and the latency of the four tor processes of the chain, not by CPU, so the worker\'s few ms of CPU per MB cannot slow it, and the ratio of two medians moves a few per cent either way between runs.',
      ].join(' '),
      figures: [
        { name: "straight to the instance's SOCKS port", value: `${medianDirect.toFixed(1)} MB/s (best ${Math.max(...d).toFixed(1)})`, limit: '', withinLimit: null },
        {
          name: 'through exitpool (1 proxy worker)',
          value: `${medianPool.toFixed(1)} MB/s (best ${Math.max(...p).toFixed(1)}), ${(medianPool / medianDirect).toFixed(3)} × direct`,
          limit: `≥ ${POOL_VS_DIRECT_TOR_BUDGET} × direct (${(medianDirect * POOL_VS_DIRECT_TOR_BUDGET).toFixed(1)} MB/s)`,
          withinLimit: medianPool >= medianDirect * POOL_VS_DIRECT_TOR_BUDGET,
        },
        {
          name: 'CPU: the worker per MB relayed; the machine idle during the downloads',
          value: `${workerMsPerMb.toFixed(1)} ms per MB (${((workerMsPerMb * medianPool) / 10).toFixed(1)} % of a core at ${medianPool.toFixed(1)} MB/s); idle ${(100 * median(idleShare.direct)).toFixed(0)} % direct, ${(100 * median(idleShare.pool)).toFixed(0)} % through exitpool`,
          limit: '',
          withinLimit: null,
        },
        {
          name: 'CPU ms per MB by process, direct | through exitpool',
          value: `${perMb('direct')} | ${perMb('pool')}`,
          limit: '',
          withinLimit: null,
        },
        { name: 'every round, direct / through exitpool', value: d.map((v, i) => `${v.toFixed(1)}/${(p[i] as number).toFixed(1)}`).join(', ') + ' MB/s', limit: '', withinLimit: null },
        { name: 'accounting reported back by the worker', value: `${pool.tally.closes} closes, ${pool.tally.bytesDown} of ${expectedDown} bytes down`, limit: 'exact', withinLimit: exact },
      ],
    };
  } finally {
    for (const s of started.reverse()) await s.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}
