/**
 * What measuring the exits' egress addresses costs (issue 31): the time to a usable pool with the
 * probe and without it, the time of one probe, and how many probes a workload of rotations makes
 * (the bound: one per exit per EGRESS_PROBE_TTL), on the real service on the private network,
 * where two of the eight exits send their traffic from another exit's /24.
 */
import type { AuditEvent } from '../shared/api/audit-event.js';
import type { ExitsView, InstanceView, PoolSummary } from '../shared/api/views.js';
import { startService, type RunningService } from '../test/support/fixtures/service.js';
import { egressTestnet, stopEgressTestnet } from '../test/support/fixtures/testnet.js';
import { ms, percentile, type BenchSection } from './report.js';
import { setTimeout as sleep } from 'node:timers/promises';

export interface EgressBenchOptions {
  /** Starts of each kind (probe on, probe off), interleaved. */
  rounds: number;
  poolSize: number;
  /** Instance rotations after the start, each pinning a newly assigned exit. */
  rotations: number;
}

/** A pool of 5: as many as the /24s the network's exits leave from, so a choice made on a published /24 often clashes once measured. */
export const FULL_EGRESS_OPTIONS: EgressBenchOptions = { rounds: 3, poolSize: 5, rotations: 20 };

const POLL_MS = 50;
const READY_TIMEOUT_MS = 180_000;

async function json<T>(svc: RunningService, jwt: string, path: string, method = 'GET'): Promise<T> {
  const r = await svc.api(path, { method, bearer: jwt });
  if (r.status !== 200) throw new Error(`${method} ${path} answered ${r.status}: ${await r.text()}`);
  return (await r.json()) as T;
}

/** Starts a service and times it from the spawn to `size` instances routable (polled every POLL_MS). */
async function timedStart(env: Record<string, string | undefined>, size: number): Promise<{ svc: RunningService; jwt: string; readyMs: number }> {
  const net = await egressTestnet();
  const t0 = performance.now();
  const svc = await startService({ POOL_SIZE: String(size), LOG_LEVEL: 'warn', EXIT_LIST: undefined, ...env }, { testnet: net });
  let jwt = '';
  for (;;) {
    if (performance.now() - t0 > READY_TIMEOUT_MS) throw new Error(`not ready within ${READY_TIMEOUT_MS} ms:\n${svc.output().slice(-2000)}`);
    try {
      jwt ||= await svc.login();
      const pool = await json<PoolSummary>(svc, jwt, '/api/pool');
      if (pool.routable >= size) return { svc, jwt, readyMs: performance.now() - t0 };
    } catch {
      // not listening yet
    }
    await sleep(POLL_MS);
  }
}

export async function benchEgressProbe(o: EgressBenchOptions = FULL_EGRESS_OPTIONS): Promise<BenchSection> {
  await egressTestnet();
  const withProbe: number[] = [];
  const without: number[] = [];
  const probeMs: { mean: number; max: number }[] = [];
  const probesAtStart: number[] = [];
  const swapsAtStart: number[] = [];
  const distinctWithout: number[] = [];
  const distinctWith: number[] = [];
  const measuredAtStart: number[] = [];
  let rotationProbes = 0;
  let serviceProbes = 0;
  let rotationPins = 0;
  let exitsMeasured = 0;
  let catalogSize = 0;
  for (let round = 0; round < o.rounds; round++) {
    // Interleaved, so load on the shared machine falls on both kinds alike.
    const off = await timedStart({ EGRESS_PROBE_URLS: 'none' }, o.poolSize);
    without.push(off.readyMs);
    try {
      // Without the probe the pool cannot tell: the /24s its instances really leave from.
      const egressOf = new Map(off.svc.net.exits.map((e) => [e.fingerprint, e.egressAddress]));
      const instances = await json<InstanceView[]>(off.svc, off.jwt, '/api/instances');
      distinctWithout.push(new Set(instances.map((i) => (egressOf.get(i.assigned_exit?.fingerprint ?? '') ?? '').split('.').slice(0, 3).join('.'))).size);
    } finally {
      await off.svc.stop();
    }
    const on = await timedStart({}, o.poolSize);
    withProbe.push(on.readyMs);
    try {
      const instances = await json<InstanceView[]>(on.svc, on.jwt, '/api/instances');
      measuredAtStart.push(instances.filter((i) => i.exit_ip_source === 'probe').length);
      distinctWith.push(new Set(instances.map((i) => i.exit_ip.split('.').slice(0, 3).join('.'))).size);
      const exits = await json<ExitsView>(on.svc, on.jwt, '/api/exits');
      probesAtStart.push(exits.egress.probes);
      const events = await json<AuditEvent[]>(on.svc, on.jwt, '/api/events?type=exit&limit=500');
      swapsAtStart.push(events.filter((e) => e.details.reason === 'egress_conflict').length);
      probeMs.push({ mean: exits.egress.mean_ms, max: exits.egress.max_ms });
      if (round === o.rounds - 1) {
        // Rotations: each pins a newly assigned exit; an exit measured within EGRESS_PROBE_TTL is not probed again.
        for (let r = 0; r < o.rotations; r++) {
          const id = r % o.poolSize;
          await json<InstanceView>(on.svc, on.jwt, `/api/instances/${id}/rotate`, 'POST');
          const deadline = performance.now() + 30_000;
          while (performance.now() < deadline) {
            const v = await json<InstanceView>(on.svc, on.jwt, `/api/instances/${id}`);
            if (!v.rotating && v.ready && v.exit_ip_source !== '' && v.exit_ip_source !== 'published') break;
            await sleep(POLL_MS);
          }
          rotationPins++;
        }
        const after = await json<ExitsView>(on.svc, on.jwt, '/api/exits');
        rotationProbes = after.egress.probes - exits.egress.probes;
        serviceProbes = after.egress.probes;
        exitsMeasured = after.exits.filter((e) => e.address_source === 'probe').length;
        catalogSize = after.exits.length;
        probeMs[probeMs.length - 1] = { mean: after.egress.mean_ms, max: after.egress.max_ms };
      }
    } finally {
      await on.svc.stop();
    }
  }
  // The other benchmarks run on the default network: this one's is not kept running beside it.
  await stopEgressTestnet();
  const sortedOn = [...withProbe].sort((a, b) => a - b);
  const sortedOff = [...without].sort((a, b) => a - b);
  const rounds = (v: number[]): string => v.map((x) => (x / 1000).toFixed(1)).join(', ');
  const lastProbe = probeMs[probeMs.length - 1] ?? { mean: 0, max: 0 };
  return {
    title: 'Egress probes: what measuring the address sites see costs',
    method:
      `The real service on the private network (8 exits; two send their traffic from another exit's /24, so a choice made on a published address can clash once measured and is made again before the instance serves). ` +
      `${o.rounds} starts of a pool of ${o.poolSize} with the probe (EGRESS_PROBE_URLS: the network's whoami /ip) and ${o.rounds} with EGRESS_PROBE_URLS=none, interleaved, no exit list; ` +
      `each timed from the spawn of the CLI to ${o.poolSize} routable instances (GET /api/pool every ${POLL_MS} ms). A start with the probe serves once every instance's exit is measured (supervisor/exits/README.md, "What sites see"). ` +
      `Then, in the last start, ${o.rotations} instance rotations (POST /api/instances/{id}/rotate, each pinning a newly assigned exit, waited for until its address is measured), counting the probes they cost: an exit measured within EGRESS_PROBE_TTL is not probed again. Probe times are the service's own (GET /api/exits \`egress\`).`,
    figures: [
      { name: `start → ${o.poolSize} instances serving, probe off: median (every round, s)`, value: `${ms(percentile(sortedOff, 0.5), 0)} (${rounds(without)})`, limit: '', withinLimit: null },
      { name: `start → ${o.poolSize} instances serving with their egress measured: median (every round, s)`, value: `${ms(percentile(sortedOn, 0.5), 0)} (${rounds(withProbe)})`, limit: '', withinLimit: null },
      { name: 'what the probe adds to the start (median against median; within the machine’s noise when near 0)', value: ms(percentile(sortedOn, 0.5) - percentile(sortedOff, 0.5), 0), limit: '', withinLimit: null },
      { name: 'instances serving with a measured exit_ip at start (every round)', value: measuredAtStart.join(', '), limit: `${o.poolSize}`, withinLimit: measuredAtStart.every((n) => n === o.poolSize) },
      { name: 'probes made by a start (every round)', value: probesAtStart.join(', '), limit: '', withinLimit: null },
      { name: 'exits swapped before serving because their measured /24 clashed (every round)', value: swapsAtStart.join(', '), limit: '', withinLimit: null },
      { name: 'distinct /24s the instances leave from, probe off (every round)', value: distinctWithout.join(', '), limit: '', withinLimit: null },
      { name: 'distinct /24s the instances leave from, probe on (every round)', value: distinctWith.join(', '), limit: `${o.poolSize}`, withinLimit: distinctWith.every((n) => n === o.poolSize) },
      { name: 'one probe through an exit (the dial through tor, GET, answer): mean / longest', value: `${ms(lastProbe.mean, 0)} / ${ms(lastProbe.max, 0)}`, limit: '', withinLimit: null },
      { name: `probes made by ${rotationPins} instance rotations after the start`, value: `${rotationProbes} (${exitsMeasured} of the ${catalogSize} exits measured by then)`, limit: '', withinLimit: null },
      {
        name: 'probes made by that service in all (start and rotations, within one EGRESS_PROBE_TTL)',
        value: String(serviceProbes),
        limit: `≤ one per exit (${catalogSize})`,
        withinLimit: serviceProbes <= catalogSize,
      },
    ],
  };
}
