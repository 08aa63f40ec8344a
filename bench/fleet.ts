/**
 * Several nodes on one Redis (issue 21): requests/s and CPU per request through HAProxy in front
 * of 1, 2 and 3 nodes, and what the hop to a session's owner costs (straight to the owner vs.
 * through another node that forwards it). One load generator for all; rounds interleaved.
 */
import { httpGetOverTunnel, openSocksTunnel, type SocksTunnelOptions } from '../test/support/clients/socks5-client.js';
import { TEST_PROXY_TOKEN, startService, type RunningService } from '../test/support/fixtures/service.js';
import { startHaproxy, type RunningHaproxy } from '../test/support/processes/haproxy.js';
import { serviceWorkers } from '../test/support/processes/inspection.js';
import { startRedis } from '../test/support/processes/redis-server.js';
import { cpuMs } from './process-usage.js';
import { percentile, type BenchSection, type Figure } from './report.js';

export interface FleetBenchOptions {
  /** Concurrent clients, each in a closed loop (connect, SOCKS5 with its own session, CONNECT, GET, close). */
  clients: number;
  roundMs: number;
  rounds: number;
}

export const FULL_FLEET_OPTIONS: FleetBenchOptions = { clients: 24, roundMs: 12_000, rounds: 2 };

const NODES = 3;
/** Per node: 2 instances and 1 proxy worker, so 3 nodes fit beside the private network on 2 cores. */
const POOL_SIZE = 2;
const PROXY_WORKERS = 1;

interface Measured {
  requests: number;
  failures: number;
  ms: number;
  /** From connect to the end of the response (the exit closes it). */
  latencies: number[];
  /** From connect to the tunnel open (SOCKS5 answered): what a hop adds shows here undiluted. */
  opens: number[];
  cpuMs: number;
}

const fresh = (): Measured => ({ requests: 0, failures: 0, ms: 0, latencies: [], opens: [], cpuMs: 0 });

/** One request; the time its tunnel took to open, or null when it failed. */
async function oneRequest(o: SocksTunnelOptions, host: string): Promise<number | null> {
  const t = await openSocksTunnel({ ...o, timeoutMs: 30_000 });
  if (t.kind !== 'open') return null;
  try {
    return (await httpGetOverTunnel(t.socket, host, '/', 30_000)).status === 200 ? t.elapsedMs : null;
  } catch {
    return null;
  } finally {
    t.socket.destroy();
  }
}

/** Every process of these nodes: supervisor and workers. */
function pidsOf(nodes: readonly RunningService[]): number[] {
  return nodes.flatMap((n) => {
    const w = serviceWorkers(n.pid);
    return [n.pid, ...w.proxy, ...w.api];
  });
}

const cpuOf = (pids: readonly number[]): number => pids.reduce((sum, pid) => sum + cpuMs(pid), 0);

async function load(
  port: number,
  pids: readonly number[],
  o: FleetBenchOptions,
  target: { host: string; targetPort: number },
  host: string,
  into: Measured,
  sessionPrefix = 'fleet',
): Promise<void> {
  const before = cpuOf(pids);
  const started = performance.now();
  const until = started + o.roundMs;
  await Promise.all(
    Array.from({ length: o.clients }, async (_, client) => {
      while (performance.now() < until) {
        const t0 = performance.now();
        const opened = await oneRequest({ ...target, port, username: `${sessionPrefix}-${client}`, password: TEST_PROXY_TOKEN }, host);
        if (opened !== null) {
          into.requests++;
          into.latencies.push(performance.now() - t0);
          into.opens.push(opened);
        } else {
          into.failures++;
        }
      }
    }),
  );
  into.ms += performance.now() - started;
  into.cpuMs += cpuOf(pids) - before;
}

export async function benchFleet(o: FleetBenchOptions = FULL_FLEET_OPTIONS): Promise<BenchSection> {
  const stops: (() => Promise<unknown>)[] = [];
  try {
    const redis = await startRedis();
    stops.push(() => redis.stop());
    const nodes = await Promise.all(
      Array.from({ length: NODES }, (_, i) =>
        startService({
          POOL_SIZE: String(POOL_SIZE),
          PROXY_WORKERS: String(PROXY_WORKERS),
          LOG_LEVEL: 'warn',
          STATE_STORE: `${redis.url}/bench`,
          NODE_NAME: `node-${i + 1}`,
          NODE_ADDRESS: '127.0.0.1',
        }),
      ),
    );
    for (const n of nodes) stops.push(() => n.stop());
    await Promise.all(nodes.map((n) => n.waitReady(POOL_SIZE, 180_000)));
    const first = nodes[0] as RunningService;
    const target = { host: 'whoami.testnet', targetPort: first.net.whoami.port };
    const host = `whoami.testnet:${first.net.whoami.port}`;
    // One balancer per fleet size, over the first n nodes.
    const balancers: RunningHaproxy[] = [];
    for (let n = 1; n <= NODES; n++) {
      const b = await startHaproxy(nodes.slice(0, n).map((s) => `127.0.0.1:${s.socksPort}`));
      stops.push(() => b.stop());
      balancers.push(b);
    }
    const results = Array.from({ length: NODES }, fresh);
    // Warm-up: every client's session placed (on whichever node it first reached), circuits built.
    for (let n = 0; n < NODES; n++) await load((balancers[n] as RunningHaproxy).port, [], { ...o, roundMs: 2_000 }, target, host, fresh());
    for (let round = 0; round < o.rounds; round++) {
      for (let k = 0; k < NODES; k++) {
        const n = (k + round) % NODES;
        await load((balancers[n] as RunningHaproxy).port, pidsOf(nodes.slice(0, n + 1)), o, target, host, results[n] as Measured);
      }
    }

    // The hop: every client's session owned by node-1 (its first request went there); the same
    // load straight to node-1 and through node-2, which forwards every connection to node-1.
    const second = nodes[1] as RunningService;
    await load(first.socksPort, [], { ...o, roundMs: 2_000 }, target, host, fresh(), 'hop');
    await load(second.socksPort, [], { ...o, roundMs: 2_000 }, target, host, fresh(), 'hop');
    const direct = fresh();
    const forwarded = fresh();
    for (let round = 0; round < o.rounds; round++) {
      const sides = [
        [direct, first.socksPort, pidsOf([first])],
        [forwarded, second.socksPort, pidsOf([first, second])],
      ] as const;
      for (const [into, port, pids] of round % 2 === 0 ? sides : [...sides].reverse()) await load(port, pids, o, target, host, into, 'hop');
    }
    return report(o, results, direct, forwarded);
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
  }
}

function report(o: FleetBenchOptions, results: Measured[], direct: Measured, forwarded: Measured): BenchSection {
  const sorted = (v: number[]): number[] => [...v].sort((a, b) => a - b);
  const rate = (m: Measured): number => (m.requests * 1000) / m.ms;
  const perRequestUs = (m: Measured): number => (m.requests === 0 ? 0 : (m.cpuMs * 1000) / m.requests);
  const figures: Figure[] = results.map((m, i) => {
    const lat = sorted(m.latencies);
    return {
      name: `${i + 1} node${i === 0 ? '' : 's'} behind HAProxy: requests/s, latency p50 / p99, CPU per request (all nodes' processes)`,
      value: `${rate(m).toFixed(0)}/s (${(rate(m) / rate(results[0] as Measured)).toFixed(2)} × 1 node), ${percentile(lat, 0.5).toFixed(1)} / ${percentile(lat, 0.99).toFixed(1)} ms, ${perRequestUs(m).toFixed(0)} µs${m.failures > 0 ? `, ${m.failures} failed` : ''}`,
      limit: '',
      withinLimit: null,
    };
  });
  const p50 = (v: number[]): number => percentile(sorted(v), 0.5);
  const p99 = (v: number[]): number => percentile(sorted(v), 0.99);
  figures.push({
    name: 'the hop to a session’s owner: tunnel open (SOCKS5 answered) p50 / p99, straight to the owner vs. through another node',
    value: `straight ${p50(direct.opens).toFixed(1)} / ${p99(direct.opens).toFixed(1)} ms, forwarded ${p50(forwarded.opens).toFixed(1)} / ${p99(forwarded.opens).toFixed(1)} ms: +${(p50(forwarded.opens) - p50(direct.opens)).toFixed(1)} ms at p50`,
    limit: '',
    withinLimit: null,
  });
  figures.push({
    name: 'the hop to a session’s owner: whole request p50 / p99, requests/s',
    value: `straight ${p50(direct.latencies).toFixed(1)} / ${p99(direct.latencies).toFixed(1)} ms at ${rate(direct).toFixed(0)}/s, forwarded ${p50(forwarded.latencies).toFixed(1)} / ${p99(forwarded.latencies).toFixed(1)} ms at ${rate(forwarded).toFixed(0)}/s`,
    limit: '',
    withinLimit: null,
  });
  figures.push({
    name: 'the hop to a session’s owner: CPU per request (the nodes involved, supervisors and workers)',
    value: `straight ${perRequestUs(direct).toFixed(0)} µs (the owner), forwarded ${perRequestUs(forwarded).toFixed(0)} µs (both nodes): the hop costs ${(perRequestUs(forwarded) - perRequestUs(direct)).toFixed(0)} µs${direct.failures + forwarded.failures > 0 ? `; ${direct.failures + forwarded.failures} failed` : ''}`,
    limit: '',
    withinLimit: null,
  });
  return {
    title: 'Several nodes on one Redis: scaling through a balancer, and the hop to a session’s owner',
    method: [
      `${NODES} real services (the CLI, ${POOL_SIZE} instances and ${PROXY_WORKERS} proxy worker each) on the private Tor network, sharing one redis-server on loopback (STATE_STORE=redis://…), and one HAProxy (Debian's, TCP round robin) in front of the first 1, 2 and 3 nodes.`,
      `One load generator (this process): ${o.clients} concurrent clients, each in a closed loop of connect, SOCKS5 with its own session (username fleet-<n>, the proxy token), CONNECT to the whoami server, GET, close. A session belongs to the node that served it first, so through a balancer of n nodes about (n-1)/n of the connections reach another node and are forwarded to the owner.`,
      `${o.rounds} rounds of ${o.roundMs / 1000} s per fleet size after a 2 s warm-up each, the order rotated every round. CPU per request is the CPU time of every process of the nodes in the path (supervisors, proxy and API workers; not tor, not HAProxy) over the requests served (from /proc).`,
      `The hop: the same ${o.clients} clients with sessions owned by node-1 (their first requests went there), rounds straight to node-1 and through node-2 (which forwards every connection to node-1), alternately, ${o.rounds} of each; the whole request ends when the exit closes the connection, so it carries tor's own timing, and the tunnel's open time shows the hop undiluted. All on one 2-core machine: the nodes, their tors and the network's relays share the cores, so more nodes here measure the cost of the fleet, not the capacity of more machines.`,
    ].join(' '),
    figures,
  };
}
