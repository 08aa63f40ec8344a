// `npm run bench`: runs the benchmarks (but WHEN_NAMED_ONLY's), prints each figure next to its
// limit, and writes docs/performance.md. Select some with BENCH=name1,name2. BENCH_QUICK=1 runs
// reduced sizes (for development on a busy machine) and only prints: the doc keeps full-size
// figures.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { packageRoot } from '../shared/version.js';
import { stopSharedTestnet } from '../test/support/fixtures/testnet.js';
import { benchConnectionSetup, FULL_SETUP_OPTIONS } from './connection-setup.js';
import { benchIdleConnections, FULL_IDLE_OPTIONS } from './idle-connections.js';
import { benchClientOverhead, FULL_CLIENT_OPTIONS } from './client-overhead.js';
import { benchColdBurst, COLD_BURST_SETTINGS_ENV, FULL_COLD_BURST_OPTIONS } from './cold-burst.js';
import { benchCountryPlacement, FULL_COUNTRY_OPTIONS } from './country-placement.js';
import { benchDurableState, FULL_DURABLE_OPTIONS } from './durable-state.js';
import { benchExitDeath, FULL_EXIT_DEATH_OPTIONS } from './exit-death.js';
import { benchEgressProbe, FULL_EGRESS_OPTIONS } from './egress-probe.js';
import { benchIpcRoundTrip } from './ipc-roundtrip.js';
import { benchPoolStart } from './pool-start.js';
import { benchPoolScale, FULL_SCALE_OPTIONS } from './pool-scale.js';
import { benchRelayThroughput, FULL_RELAY_OPTIONS } from './relay-throughput.js';
import { renderSection, type BenchSection } from './report.js';
import { benchPeers, FULL_PEERS_OPTIONS, PEERS_NODE_OPTIONS_ENV } from './peers.js';
import { benchFleet, FULL_FLEET_OPTIONS } from './fleet.js';
import { benchSessionRotation, FULL_ROTATION_OPTIONS } from './session-rotation.js';
import { benchVerdictCost, FULL_VERDICT_COST_OPTIONS } from './verdict-cost.js';
import { benchTorRelay, FULL_TOR_RELAY_OPTIONS } from './tor-relay.js';
import { benchWorkerProfile, FULL_PROFILE_OPTIONS } from './worker-profile.js';

const QUICK = process.env.BENCH_QUICK === '1';

const BENCHES: Record<string, () => Promise<BenchSection>> = {
  ipc: () => benchIpcRoundTrip(),
  relay: () => benchRelayThroughput(QUICK ? { ...FULL_RELAY_OPTIONS, totalBytes: 50e6, rounds: 2 } : FULL_RELAY_OPTIONS),
  setup: () => benchConnectionSetup(QUICK ? { ...FULL_SETUP_OPTIONS, samples: 800, rateRunMs: 2000 } : FULL_SETUP_OPTIONS),
  idle: () => benchIdleConnections(QUICK ? { ...FULL_IDLE_OPTIONS, connections: 2000 } : FULL_IDLE_OPTIONS),
  profile: () => benchWorkerProfile(QUICK ? { relayBytes: 200e6, setups: 1000 } : FULL_PROFILE_OPTIONS),
  'pool-start': () => benchPoolStart(),
  scale: () => benchPoolScale(QUICK ? { ...FULL_SCALE_OPTIONS, sizes: [4, 10], exits: 10, idleMs: 5_000, roundMs: 3_000, rounds: 1 } : FULL_SCALE_OPTIONS),
  'tor-relay': () => benchTorRelay(QUICK ? { bytes: 8e6, rounds: 2 } : FULL_TOR_RELAY_OPTIONS),
  rotation: () => benchSessionRotation(QUICK ? { sessions: 8, newnymSamples: 2, busy: { rotations: 8, perInstance: 1, rotatorSteps: [1, 2], rotationsPerRotator: 4, paceMs: 500, defaultPoolRotators: 3 } } : FULL_ROTATION_OPTIONS),
  clients: () => benchClientOverhead(QUICK ? { requests: 50, rounds: 1 } : FULL_CLIENT_OPTIONS),
  country: () => benchCountryPlacement(QUICK ? { samples: 3 } : FULL_COUNTRY_OPTIONS),
  state: () => benchDurableState(QUICK ? { storedSessions: 20_000, newPerSecond: 1000, loadSeconds: 4, startRounds: 1 } : FULL_DURABLE_OPTIONS),
  peers: () => benchPeers(QUICK ? { clients: 16, roundMs: 4_000, rounds: 1, burst: 100, bursts: 1, ceilingInFlight: 32, ceilingRoundMs: 1_000 } : FULL_PEERS_OPTIONS),
  'cold-burst': () => benchColdBurst(QUICK ? { burst: 100, servicesPerSetting: 1, laterBursts: 1 } : FULL_COLD_BURST_OPTIONS),
  fleet: () => benchFleet(QUICK ? { clients: 12, roundMs: 4_000, rounds: 1 } : FULL_FLEET_OPTIONS),
  verdicts: () => benchVerdictCost(QUICK ? { sessions: 2_000, records: 50_000, batch: 256, rounds: 1 } : FULL_VERDICT_COST_OPTIONS),
  'exit-death': () => benchExitDeath(QUICK ? { rounds: 2, sessionsPerInstance: 3 } : FULL_EXIT_DEATH_OPTIONS),
  egress: () => benchEgressProbe(QUICK ? { rounds: 1, poolSize: 4, rotations: 8 } : FULL_EGRESS_OPTIONS),
};

/**
 * Studies rather than budgets: they take something apart (cold-burst) or measure what has no
 * limit of its own (scale: pools of 4, 10 and 40; clients: what each client library adds; fleet:
 * nodes behind a balancer), and together they take about 18 minutes. Run when named
 * (BENCH=scale), left out of the whole run so that it stays within its 15 minutes.
 */
const WHEN_NAMED_ONLY: ReadonlySet<string> = new Set(['cold-burst', 'scale', 'clients', 'fleet']);

async function main(): Promise<void> {
  const selected = process.env.BENCH ? process.env.BENCH.split(',') : Object.keys(BENCHES).filter((name) => !WHEN_NAMED_ONLY.has(name));
  const sections: BenchSection[] = [];
  try {
    for (const name of selected) {
      const bench = BENCHES[name];
      if (!bench) throw new Error(`unknown benchmark ${name}; known: ${Object.keys(BENCHES).join(', ')}`);
      process.stderr.write(`bench: ${name} …\n`);
      const started = performance.now();
      const s = await bench();
      process.stdout.write(renderSection(s) + '\n');
      process.stderr.write(`bench: ${name} took ${((performance.now() - started) / 1000).toFixed(0)} s\n`);
      sections.push(s);
    }
  } finally {
    // tor-relay, rotation and peers share one private network (the end-to-end tests' fixture).
    await stopSharedTestnet();
  }
  if (QUICK) {
    process.stderr.write('bench: BENCH_QUICK=1, docs/performance.md left as it is\n');
    return;
  }
  writeSections(path.join(packageRoot(), 'docs', 'performance.md'), sections.map((sec, i) => [selected[i] as string, sec]));
}

/**
 * Replaces each benchmark's block in docs/performance.md (between its markers), appending
 * blocks seen for the first time, so running a subset updates only that subset.
 */
function writeSections(file: string, sections: [string, BenchSection][]): void {
  let doc = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '# Performance\n';
  // The variables that chose what ran are part of the command that reproduces it.
  const chosen = [COLD_BURST_SETTINGS_ENV, PEERS_NODE_OPTIONS_ENV, 'BENCH_QUICK']
    .filter((name) => (process.env[name] ?? '') !== '')
    .map((name) => `${name}=${process.env[name] ?? ''} `)
    .join('');
  const stamp = `Command: \`${chosen}BENCH=NAME npm run bench\` (all: \`npm run bench\`). Machine: ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}. Run at ${new Date().toISOString()}.`;
  for (const [name, section] of sections) {
    const open = `<!-- bench:${name} -->`;
    const close = `<!-- /bench:${name} -->`;
    const block = `${open}\n${renderSection(section)}\n_${stamp.replace('NAME', name)}_\n${close}`;
    const a = doc.indexOf(open);
    const b = doc.indexOf(close);
    doc = a >= 0 && b > a ? doc.slice(0, a) + block + doc.slice(b + close.length) : `${doc.trimEnd()}\n\n${block}\n`;
  }
  fs.writeFileSync(file, doc);
  process.stderr.write(`bench: updated ${path.relative(process.cwd(), file)}\n`);
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
