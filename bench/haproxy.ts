/**
 * HAProxy as the peer a user would put in front of several tors instead of exitpool: TCP mode,
 * round robin over the tors' SOCKS sockets (test/support/processes/haproxy.ts runs it).
 */
import { startHaproxy as startRoundRobin, type RunningHaproxy } from '../test/support/processes/haproxy.js';

export type { RunningHaproxy } from '../test/support/processes/haproxy.js';

/** A round-robin TCP frontend over `socketPaths` (Unix sockets: the tors' SocksPorts). */
export function startHaproxy(socketPaths: readonly string[]): Promise<RunningHaproxy> {
  return startRoundRobin(socketPaths.map((p) => `unix@${p}`));
}
