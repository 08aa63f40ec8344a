/**
 * How many connections a second the proxy layer itself sets up, for each PROXY_WORKERS choice:
 * the real proxy workers (bench/proxy-harness.ts) and a bare Node relay (its clients with the
 * credentials passed through, and without) in front of the lean SOCKS5 backend, which answers
 * the CONNECT itself (no tor, no destination). A closed loop of clients opens a tunnel (connect,
 * SOCKS5, CONNECT) and closes it, as fast as it goes; paths interleaved, rounds rotated.
 */
import { DISCARD_HOST } from './lean-socks-backend.js';
import { startChildServer, type ChildServer } from './child-server.js';
import { cpuMs } from './process-usage.js';
import { PASS_THROUGH_CREDENTIALS } from './pass-through-credentials.js';
import { startProxyHarness, type ProxyHarness } from './proxy-harness.js';
import { openSocksTunnel, type SocksTunnelOptions } from '../test/support/clients/socks5-client.js';

export interface CeilingOptions {
  /** The PROXY_WORKERS choices to measure. */
  workerCounts: readonly number[];
  inFlight: number;
  roundMs: number;
  rounds: number;
}

export interface Ceiling {
  name: string;
  /** Tunnels opened and closed per second. */
  perSecond: number;
  /** CPU of the proxying processes per tunnel, µs. */
  cpuUs: number;
}

interface CeilingPath {
  name: string;
  pids(): number[];
  options(client: number): SocksTunnelOptions;
  done: number;
  ms: number;
  cpuMs: number;
}

async function closedLoop(path: CeilingPath, inFlight: number, durationMs: number): Promise<void> {
  const pids = path.pids();
  const before = pids.reduce((sum, pid) => sum + cpuMs(pid), 0);
  const started = performance.now();
  await Promise.all(
    Array.from({ length: inFlight }, async (_, client) => {
      while (performance.now() - started < durationMs) {
        const t = await openSocksTunnel({ ...path.options(client), timeoutMs: 10_000 });
        if (t.kind === 'open') {
          t.socket.destroy();
          path.done += 1;
        }
      }
    }),
  );
  path.ms += performance.now() - started;
  path.cpuMs += pids.reduce((sum, pid) => sum + cpuMs(pid), 0) - before;
}

export async function measureConnectionCeilings(o: CeilingOptions): Promise<Ceiling[]> {
  const stops: (() => Promise<void>)[] = [];
  try {
    const backend: ChildServer = await startChildServer('socks-backend');
    stops.push(() => backend.stop());
    const relay: ChildServer = await startChildServer('bare-relay', [String(backend.port)]);
    stops.push(() => relay.stop());
    const target = { host: DISCARD_HOST, targetPort: 9 };
    // The relay twice: with the credentials exitpool's clients present (passed through to the
    // backend, the same SOCKS5 conversation, PASS_THROUGH_CREDENTIALS), and without.
    const paths: CeilingPath[] = [
      { name: 'bare relay', pids: () => [relay.pid], options: () => ({ ...target, port: relay.port, ...PASS_THROUGH_CREDENTIALS }), done: 0, ms: 0, cpuMs: 0 },
      { name: 'bare relay, no credentials', pids: () => [relay.pid], options: () => ({ ...target, port: relay.port }), done: 0, ms: 0, cpuMs: 0 },
    ];
    for (const workers of o.workerCounts) {
      const harness: ProxyHarness = await startProxyHarness({ workers, backend: { host: '127.0.0.1', port: backend.port } });
      stops.push(() => harness.stop());
      paths.push({
        name: `PROXY_WORKERS=${workers}`,
        pids: () => harness.workerPids(),
        options: (client) => ({ ...target, port: harness.socksPort, ...harness.credentials(`ceiling-${client}`) }),
        done: 0,
        ms: 0,
        cpuMs: 0,
      });
    }
    // Warm-up: JIT, leases, the backend's sockets.
    for (const p of paths) await closedLoop({ ...p, done: 0, ms: 0, cpuMs: 0 }, o.inFlight, 1_000);
    for (let round = 0; round < o.rounds; round++) {
      for (let i = 0; i < paths.length; i++) await closedLoop(paths[(i + round) % paths.length] as CeilingPath, o.inFlight, o.roundMs);
    }
    return paths.map((p) => ({ name: p.name, perSecond: (p.done * 1000) / p.ms, cpuUs: p.done === 0 ? 0 : (p.cpuMs * 1000) / p.done }));
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
  }
}
