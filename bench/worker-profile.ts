/**
 * Where a proxy worker's CPU goes on its two hot paths: relaying bulk data, and setting
 * connections up. The worker runs with --cpu-prof; the profiles stay in a temporary directory
 * (named in the section) for a flame graph in Chrome DevTools or speedscope.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startChildServer } from './child-server.js';
import { monotonicMicros, summariseCpuProfile, type ProfileSummary, type ProfileWindow } from './cpu-profile-summary.js';
import { startProxyHarness } from './proxy-harness.js';
import { measureDownload } from './relay-throughput.js';
import type { BenchSection, Figure } from './report.js';
import { openSocksTunnelOrThrow } from '../test/support/clients/socks5-client.js';

export interface ProfileBenchOptions {
  relayBytes: number;
  setups: number;
}

export const FULL_PROFILE_OPTIONS: ProfileBenchOptions = { relayBytes: 1e9, setups: 5000 };

async function profiledRun(dir: string, name: string, work: (port: number, credentials: (k: string) => { username: string; password: string }, sourcePort: number) => Promise<void>): Promise<ProfileSummary> {
  const started: { stop(): Promise<void> }[] = [];
  const window: ProfileWindow = { fromUs: 0, toUs: 0 };
  try {
    const source = await startChildServer('download-source');
    started.push(source);
    const backend = await startChildServer('socks-backend');
    started.push(backend);
    const pool = await startProxyHarness({
      workers: 1,
      backend: { host: '127.0.0.1', port: backend.port },
      execArgv: ['--cpu-prof', '--cpu-prof-dir', dir, '--cpu-prof-name', `${name}.cpuprofile`, '--cpu-prof-interval', '250'],
    });
    started.push(pool);
    window.fromUs = monotonicMicros();
    await work(pool.socksPort, (k) => pool.credentials(k), source.port);
    window.toUs = monotonicMicros();
  } finally {
    // The profile is written when the worker exits.
    for (const s of started.reverse()) await s.stop();
  }
  return summariseCpuProfile(path.join(dir, `${name}.cpuprofile`), [window]);
}

function figuresOf(label: string, s: ProfileSummary, per: { count: number; unit: string }): Figure[] {
  const pct = (v: number): string => `${((100 * v) / s.busyMs).toFixed(0)} %`;
  return [
    {
      name: `${label}: busy time by kind`,
      value: `${((s.busyMs * 1000) / per.count).toFixed(1)} µs per ${per.unit}; native calls (mostly system calls) ${pct(s.byKind.native)}, Node internals ${pct(s.byKind.node)}, exitpool code ${pct(s.byKind.exitpool)}, GC ${pct(s.byKind.gc)}, other ${pct(s.byKind.other)}`,
      limit: '',
      withinLimit: null,
    },
    { name: `${label}: heaviest functions (self time)`, value: s.top.map((t) => `${t.name} ${pct(t.ms)}`).join('; '), limit: '', withinLimit: null },
  ];
}

export async function benchWorkerProfile(options: ProfileBenchOptions = FULL_PROFILE_OPTIONS): Promise<BenchSection> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-bench-profile-'));
  const relay = await profiledRun(dir, 'relay', async (port, credentials, sourcePort) => {
    await measureDownload(port, { host: '127.0.0.1', port: sourcePort }, options.relayBytes, 4, (i) => credentials(`profile-${i}`));
  });
  const setup = await profiledRun(dir, 'setup', async (port, credentials, sourcePort) => {
    let done = 0;
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        while (done < options.setups) {
          done += 1;
          const t = await openSocksTunnelOrThrow({ port, host: '127.0.0.1', targetPort: sourcePort, ...credentials(`profile-${done % 100}`) });
          t.socket.destroy();
        }
      }),
    );
  });
  return {
    title: 'Proxy worker CPU profile',
    method: [
      `One proxy worker run with --cpu-prof (sampling every 250 µs) for two workloads on the fast local backend: ${(options.relayBytes / 1e9).toFixed(1)} GB relayed over 4 streams, and ${options.setups} connections set up and closed by 32 clients in a closed loop.`,
      'Busy time is the sampled time that was not idle while the workload ran (start-up and shutdown left out; V8 profile timestamps share the monotonic clock with process.hrtime); "native" frames are C++ bindings (socket writes, connect, close), so their time is mostly the system calls.',
      `The profiles are in ${dir} (relay.cpuprofile, setup.cpuprofile) for a flame graph (Chrome DevTools, Performance tab, or speedscope).`,
    ].join(' '),
    figures: [...figuresOf('relay', relay, { count: options.relayBytes / 1e6, unit: 'MB' }), ...figuresOf('setup', setup, { count: options.setups, unit: 'connection' })],
  };
}
