import net from 'node:net';
import { MAX_POOL_SIZE, PORTS_PER_INSTANCE } from '../../../shared/config/limits.js';

export class NoFreePortRangeError extends Error {
  constructor(readonly count: number) {
    super(`no ${count} free loopback ports found in the tests' port ranges`);
    this.name = 'NoFreePortRangeError';
  }
}

/** The tests' and the benchmarks' one way to find loopback ports. */

/**
 * Where single ports (listeners, a Redis, an HAProxy) are drawn from: below the session ports
 * (12000 and up) and far below the kernel's ephemeral range (32768 and up). A port the OS hands
 * out for `listen(0)` is an ephemeral one, and between this check and the service binding it
 * (about a second: the supervisor and its workers start first) any outgoing connection of the
 * run (a tor of the test network, curl, a client) could take it as its local port: a CI run once
 * failed on `SOCKS_PORT=36655: 127.0.0.1:36655 is already in use by another process`. From 10100,
 * not 10000: `fetch` refuses port 10080 (one of the Fetch standard's "bad ports"), and a service
 * given it as API_PORT was never reached by the tests (waitReady ran out its time).
 */
const SINGLE_PORTS_START = 10_100;
const SINGLE_PORTS_END = 12_000;
/**
 * Ports handed out lately are not handed out again: a service started a moment ago may not have
 * bound its ports yet, so "free now" is not enough. Half the range, so a search ends quickly.
 */
const RECENT_PORTS_KEPT = (SINGLE_PORTS_END - SINGLE_PORTS_START) / 2;
const recentPorts: number[] = [];
const recentPortSet = new Set<number>();

function remember(port: number): void {
  recentPorts.push(port);
  recentPortSet.add(port);
  while (recentPorts.length > RECENT_PORTS_KEPT) recentPortSet.delete(recentPorts.shift() as number);
}

/** A TCP port on 127.0.0.1 that was free a moment ago and was not handed out lately. */
export async function freePort(): Promise<number> {
  return (await freePorts(1))[0] as number;
}

/** `count` different ports on 127.0.0.1, each free a moment ago and none handed out lately. */
export async function freePorts(count: number): Promise<number[]> {
  const ports: number[] = [];
  for (let attempt = 0; ports.length < count; attempt++) {
    if (attempt >= 200 + count * 20) throw new NoFreePortRangeError(count);
    const port = SINGLE_PORTS_START + Math.floor(Math.random() * (SINGLE_PORTS_END - SINGLE_PORTS_START));
    if (recentPortSet.has(port)) continue;
    // Claimed before the check, which waits: two services started together (fleet-nodes) search
    // at once, and a check made while the other search's probe listener was closing found the
    // port free for both (one service then failed to bind it). A port found busy stays claimed,
    // which costs nothing.
    remember(port);
    if (!(await probe(port))) continue;
    ports.push(port);
  }
  return ports;
}

/** Whether `port` on 127.0.0.1 can be bound now. */
export function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

/** How the searches check a port: `portFree`, unless the finder's own unit test gives a stand-in. */
let probe: (port: number) => Promise<boolean> = portFree;

/**
 * For the finder's own unit test: checks ports with `standIn` until the returned function is
 * called. A stand-in that waits and then says "free" is what a real check says to the second of
 * two searches when the first one's probe listener has just closed (its close callback not yet
 * run): the window the claims close, which real timing hits too rarely to test.
 */
export function probePortsWith(standIn: (port: number) => Promise<boolean>): () => void {
  probe = standIn;
  return () => {
    probe = portFree;
  };
}

/** Where instance port blocks are drawn from: above the test networks' blocks, below the ephemeral ports. */
const INSTANCE_BLOCKS_START = 22_000;
const INSTANCE_BLOCKS_END = 32_768;

/**
 * A block of ports for the instances (PORTS_PER_INSTANCE each) that is free now and holds none
 * of `taken` (ports already picked for the listeners but not bound yet; the service refuses to
 * start when its instance ports overlap a listener).
 */
async function freeBlock(size: number, taken: readonly number[]): Promise<number> {
  // The configuration refuses a listener inside the whole instance range (MAX_POOL_SIZE
  // instances), whatever the pool size: keep the listeners out of all of it.
  const range = MAX_POOL_SIZE * PORTS_PER_INSTANCE;
  // Below the kernel's ephemeral range (32768 and up on Linux): under load its ports are held by
  // the tests' own outgoing connections, so a block there was often found busy 50 times running.
  // Above the test networks' port blocks (20000 and up, a few hundred ports).
  const slots = Math.floor((INSTANCE_BLOCKS_END - INSTANCE_BLOCKS_START - size) / 10);
  for (let attempt = 0; attempt < 200; attempt++) {
    const base = INSTANCE_BLOCKS_START + Math.floor(Math.random() * slots) * 10;
    if (taken.some((p) => p >= base && p < base + range)) continue;
    if (!claimRange(base, size)) continue;
    const checks = await Promise.all(Array.from({ length: size }, (_, i) => probe(base + i)));
    if (checks.every(Boolean)) return base;
  }
  throw new NoFreePortRangeError(size);
}

/**
 * Port ranges handed out lately (instance blocks, session port bases), each claimed before its
 * ports are checked, as `freePorts` claims single ports: two services started together must not
 * both be handed one range. Bounded: the oldest claims lapse (their services bound them long ago).
 */
const RECENT_RANGES_KEPT = 16;
const recentRanges: { start: number; end: number }[] = [];

/** Claims [start, start + size) unless it overlaps a range claimed lately. */
function claimRange(start: number, size: number): boolean {
  const end = start + size;
  if (recentRanges.some((r) => start < r.end && r.start < end)) return false;
  recentRanges.push({ start, end });
  if (recentRanges.length > RECENT_RANGES_KEPT) recentRanges.shift();
  return true;
}

/**
 * Ports for a service: its listeners (SOCKS, HTTP, API, and the hop listener a node of a fleet
 * opens), and a block for `instances` instances that is free now and holds none of them, nor
 * `alsoTaken` (a port the caller picked itself). None is in the kernel's ephemeral range, where
 * the run's own outgoing connections could take it before the service binds it.
 */
export async function servicePorts(instances: number, alsoTaken: readonly number[] = []): Promise<{ socks: number; http: number; api: number; hop: number; instanceBase: number }> {
  const [socks, http, api, hop] = (await freePorts(4)) as [number, number, number, number];
  return { socks, http, api, hop, instanceBase: await freeBlock(instances * PORTS_PER_INSTANCE, [socks, http, api, hop, ...alsoTaken]) };
}

/**
 * A base for SESSION_PORT_BASE whose `count` ports are free now. Drawn from 12000–19999: below
 * the test network's port blocks (20000 and up, 100 a block), the instance ports fixtures/service.ts
 * draws (22000 to 32767) and the kernel's ephemeral range (32768 and up), so none of them can take
 * these ports between this check and the service binding them.
 */
export async function freeSessionPortBase(count: number): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = 12_000 + Math.floor(Math.random() * 790) * 10;
    if (!claimRange(base, count)) continue;
    const checks = await Promise.all(Array.from({ length: count }, (_, i) => probe(base + i)));
    if (checks.every(Boolean)) return base;
  }
  throw new NoFreePortRangeError(count);
}
