/**
 * Bursts of connections on one session: many SOCKS5 requests started at once, through the pool
 * and the same burst straight to the tor instance serving that session, each timed from the
 * burst's start to its response (bench/peers.ts, bench/cold-burst.ts).
 */
import { httpGetOverTunnel, openSocksTunnel, type SocksTunnelOptions } from '../test/support/clients/socks5-client.js';
import { percentile } from './report.js';
import { setTimeout as sleep } from 'node:timers/promises';

/** Between two bursts: the previous one's connections have closed on every side. */
export const BURST_PAUSE_MS = 500;

/** Completion times (ms, sorted) of one burst through the pool and of the same burst straight to the session's instance. */
export interface BurstPair {
  pool: number[];
  direct: number[];
  /** The SOCKS socket of the session's instance, where the straight burst went. */
  instanceSocket: string;
  /** The same burst through a bare Node relay to that instance (relayBurst), when the caller sent one. */
  relay?: number[];
}

/** One request: a tunnel, a GET, the tunnel closed; whether it answered 200. */
export async function oneRequest(o: SocksTunnelOptions, host: string): Promise<boolean> {
  const t = await openSocksTunnel({ ...o, timeoutMs: 30_000 });
  if (t.kind !== 'open') return false;
  try {
    const r = await httpGetOverTunnel(t.socket, host, '/', 30_000);
    return r.status === 200;
  } catch {
    return false;
  } finally {
    t.socket.destroy();
  }
}

/** Completion times (ms) of `n` requests started at once; failed ones left out. */
export async function burstOf(n: number, options: () => SocksTunnelOptions, host: string): Promise<number[]> {
  const started = performance.now();
  const done = await Promise.all(
    Array.from({ length: n }, async () => {
      const ok = await oneRequest(options(), host);
      return ok ? performance.now() - started : Number.NaN;
    }),
  );
  return done.filter((v) => !Number.isNaN(v));
}

export const sortedCopy = (v: number[]): number[] => [...v].sort((a, b) => a - b);


export interface BurstPairRequest {
  burst: number;
  host: string;
  /** The tunnel options of a connection through the pool on the burst's session. */
  pool: () => SocksTunnelOptions;
  /** The SOCKS socket of the instance serving the session (known once the pool has routed it). */
  instanceSocket: () => Promise<string>;
  target: { host: string; targetPort: number };
  /** Straight to the instance first (the session must be placed already), else the pool first. */
  directFirst: boolean;
}

/** One burst through the pool and the same burst straight to the session's instance, BURST_PAUSE_MS of quiet before each. */
export async function burstPair(r: BurstPairRequest): Promise<BurstPair> {
  let instanceSocket = '';
  const direct = async (): Promise<number[]> => {
    instanceSocket = await r.instanceSocket();
    return burstOf(r.burst, () => ({ ...r.target, proxyPath: instanceSocket }), r.host);
  };
  await sleep(BURST_PAUSE_MS);
  if (r.directFirst) {
    const d = await direct();
    await sleep(BURST_PAUSE_MS);
    return { direct: sortedCopy(d), pool: sortedCopy(await burstOf(r.burst, r.pool, r.host)), instanceSocket };
  }
  const pool = await burstOf(r.burst, r.pool, r.host);
  await sleep(BURST_PAUSE_MS);
  return { pool: sortedCopy(pool), direct: sortedCopy(await direct()), instanceSocket };
}

/**
 * The same burst through a bare Node relay (bare-relay.ts) listening on `relayPort` in front of
 * a pair's instance, after BURST_PAUSE_MS of quiet: the least a Node process in the path adds.
 * Sent apart from burstPair so that what a caller reads over the pair (CPU, events) is the pair's.
 */
export async function relayBurst(r: Pick<BurstPairRequest, 'burst' | 'host' | 'target'>, relayPort: number): Promise<number[]> {
  await sleep(BURST_PAUSE_MS);
  return sortedCopy(await burstOf(r.burst, () => ({ ...r.target, port: relayPort }), r.host));
}

/** What the pool added to the burst's median. */
export const addedAtP50 = (pair: BurstPair): number => percentile(pair.pool, 0.5) - percentile(pair.direct, 0.5);
/** What the bare relay added to the same burst's median (NaN without a relay burst). */
export const relayAddedAtP50 = (pair: BurstPair): number => (pair.relay === undefined ? Number.NaN : percentile(pair.relay, 0.5) - percentile(pair.direct, 0.5));
