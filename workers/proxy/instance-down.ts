/**
 * Tells the dials of a proxy worker that an instance stopped answering (the supervisor's
 * liveness probe, broadcast as 'instance-down'). A frozen tor still accepts TCP on its SocksPort,
 * so a dial already waiting on it would otherwise wait out the dial deadline; a watched dial is
 * aborted at once and re-routed (see the listeners).
 */
import type { TransportFailureRecord } from '../../shared/ipc/protocol.js';
import { SocksDialError } from './socks5-client.js';

/**
 * How a dial abandoned because its instance went down is accounted: a failed request, not
 * scored (the instance is out of rotation already; scoring it again would blame it twice).
 */
export const INSTANCE_DOWN_FAILURE: TransportFailureRecord = Object.freeze({ kind: 'dial', scored: false });

export type WatchedDial<T> =
  | { ok: true; value: T }
  | { ok: false; error: unknown; elapsedMs: number; instanceDown: boolean };

/**
 * Runs `dial` through `instanceId`. If the instance is reported down before the dial settles,
 * `abort` ends it and the outcome says so: the client has had no reply yet, so the caller may
 * route again. Without a signal (component tests) the dial simply runs.
 */
export async function dialWatched<T>(
  signal: InstanceDownSignal | undefined,
  instanceId: number,
  abort: () => void,
  dial: () => Promise<T>,
): Promise<WatchedDial<T>> {
  const started = performance.now();
  let instanceDown = false;
  const unwatch = signal?.watch(instanceId, () => {
    instanceDown = true;
    abort();
  });
  try {
    return { ok: true, value: await dial() };
  } catch (error) {
    const elapsedMs = error instanceof SocksDialError ? error.elapsedMs : performance.now() - started;
    return { ok: false, error, elapsedMs, instanceDown };
  } finally {
    unwatch?.();
  }
}

export class InstanceDownSignal {
  private readonly watchers = new Map<number, Set<() => void>>();

  /** Calls `onDown` if the instance is reported down before the returned function is called. */
  watch(instanceId: number, onDown: () => void): () => void {
    this.add(instanceId, onDown);
    return () => this.remove(instanceId, onDown);
  }

  /** watch() without the returned closure: `remove` with the same function ends the watch. */
  add(instanceId: number, onDown: () => void): void {
    let set = this.watchers.get(instanceId);
    if (!set) {
      set = new Set();
      this.watchers.set(instanceId, set);
    }
    set.add(onDown);
  }

  remove(instanceId: number, onDown: () => void): void {
    const current = this.watchers.get(instanceId);
    if (!current) return;
    current.delete(onDown);
    if (current.size === 0) this.watchers.delete(instanceId);
  }

  markDown(instanceId: number): void {
    const set = this.watchers.get(instanceId);
    if (!set) return;
    this.watchers.delete(instanceId);
    for (const onDown of set) onDown();
  }

  /** Dials being watched now (for tests and leak checks). */
  get size(): number {
    let n = 0;
    for (const set of this.watchers.values()) n += set.size;
    return n;
  }
}
