import { setTimeout as sleep } from 'node:timers/promises';
import type { RunningService } from '../fixtures/service.js';
import { pollUntil } from '../waiting.js';
import { HealApi } from './api-client.js';

/**
 * Nodes that bootstrap together may choose one exit (or one /24) at once; the one that claims it
 * second moves (a rotation) after it is ready (supervisor/fleet/README.md, "An exit is one
 * node's"). Tests that compare IPs start once every instance of every node is on an exit of its
 * own, no rotation under way, and it stays so for half a lease (at least one renewal).
 * Resolves with every instance's assigned exit, node by node.
 */
export async function waitFleetSettled(services: readonly RunningService[], perNode: number, nodeLeaseMs: number): Promise<string[]> {
  const apis = await Promise.all(services.map((svc) => HealApi.signIn(svc)));
  const read = async (): Promise<string[] | undefined> => {
    const all = (await Promise.all(apis.map((api) => api.instances()))).flat();
    if (all.length !== services.length * perNode) return undefined;
    if (all.some((i) => i.rotating || !i.ready || i.assigned_exit === null || !i.pinned_exit.includes(i.assigned_exit.fingerprint))) return undefined;
    const exits = all.map((i) => i.assigned_exit?.fingerprint ?? '');
    return new Set(exits).size === exits.length ? exits : undefined;
  };
  for (;;) {
    const settled = await pollUntil('every node on exits of its own, no rotation under way', read, 90_000);
    await sleep(nodeLeaseMs / 2);
    const again = await read();
    if (again !== undefined && JSON.stringify(again) === JSON.stringify(settled)) return settled;
  }
}
