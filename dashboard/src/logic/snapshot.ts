import type { InstanceView, PoolSummary, StatsSample } from '../../../shared/api/views.js';

/**
 * The payload of the stream's `state` event: the supervisor's StateSnapshot
 * (shared/ipc/protocol.ts). Restated here because the protocol module also pulls in the
 * server's IPC types, which need Node's; a unit test asserts the two stay assignable both ways.
 */
export interface StreamSnapshot {
  pool: PoolSummary;
  instances: InstanceView[];
  stats: StatsSample | null;
}

/** The snapshot with one instance replaced (an action's answer shown before the next snapshot). */
export function withInstance(snapshot: StreamSnapshot, instance: InstanceView): StreamSnapshot {
  const found = snapshot.instances.some((i) => i.id === instance.id);
  if (!found) return snapshot;
  return { ...snapshot, instances: snapshot.instances.map((i) => (i.id === instance.id ? instance : i)) };
}
