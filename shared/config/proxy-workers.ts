import os from 'node:os';

/**
 * Cores per proxy worker in the default PROXY_WORKERS. A proxied request costs the tor serving
 * it about as much CPU as the proxy layer costs in all (tor 300–400 µs, the proxy layer at most
 * 1.3 × a bare Node relay, about 300 µs, on the development machine kind: docs/performance.md),
 * so on a machine that runs both at capacity the workers need about half of the cores, and one
 * worker, one process, uses at most one core. A worker more than that load needs costs CPU
 * instead of saving it: the same connections spread over more processes run their code colder
 * (on 2 cores, two workers spent 1.2–1.4 × one worker's CPU per request, their connections/s
 * ceiling was lower, and bursts came out better or worse from run to run), and every worker
 * wakes for every connection on the shared listening socket.
 */
export const CORES_PER_PROXY_WORKER = 2;

/** The default PROXY_WORKERS for a machine with `cores` cores: one per CORES_PER_PROXY_WORKER, at least one. */
export function proxyWorkersFor(cores: number): number {
  return Math.max(1, Math.floor(cores / CORES_PER_PROXY_WORKER));
}

/** The default PROXY_WORKERS for this machine (os.availableParallelism(): the cores this process may use). */
export function defaultProxyWorkers(): number {
  return proxyWorkersFor(os.availableParallelism());
}
