import { startTestnet, type Testnet } from '../../internal/testnet/index.js';
import { isProcessAlive } from '../../internal/testnet/process-liveness.js';

/**
 * One private Tor network per mocha run, started lazily by the first test that needs it
 * (starting costs tens of seconds, so every end-to-end file shares it) and stopped by the root
 * hook below once every test has run. Load this file with mocha's `require` (see .mocharc.json)
 * so the hook is registered; without it the network still dies with the process (exit hook,
 * __OwningControllerProcess), just less tidily.
 */
let shared: Promise<Testnet> | undefined;

/** Milliseconds the shared network took from start to usable (undefined until it is). */
export let sharedTestnetUsableAfterMs: number | undefined;

export const SHARED_TESTNET_START_TIMEOUT_MS = 180_000;

export function sharedTestnet(): Promise<Testnet> {
  shared ??= (async () => {
    const net = await startTestnet();
    try {
      await net.waitUntilUsable();
    } catch (err) {
      await net.stop();
      throw err;
    }
    sharedTestnetUsableAfterMs = net.usableAfterMs;
    return net;
  })();
  return shared;
}

export class TestnetLeftoverError extends Error {
  constructor(readonly pids: readonly number[]) {
    super(`tor processes of the shared test network still alive after stop(): ${pids.join(', ')}`);
    this.name = 'TestnetLeftoverError';
  }
}

/** Stops the shared network (if one was started) and fails if any of its tors survived. */
export async function stopSharedTestnet(): Promise<void> {
  const pending = shared;
  shared = undefined;
  if (!pending) return;
  let net: Testnet;
  try {
    net = await pending;
  } catch {
    return; // it never started; its start already cleaned up
  }
  const pids = [...net.pids];
  await net.stop();
  const alive = pids.filter((pid) => isProcessAlive(pid));
  if (alive.length > 0) throw new TestnetLeftoverError(alive);
}

export const mochaHooks = {
  async afterAll(this: Mocha.Context): Promise<void> {
    this.timeout(60_000);
    await stopSharedTestnet();
  },
};
