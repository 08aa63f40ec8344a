// A cluster worker for the worker-manager tests: the real IPC endpoint over the real
// process channel, with two test behaviours driven by the ping payload.
import { IpcEndpoint, channelToParent } from '../../../shared/ipc/index.js';
import { ROLE_ENV, type WorkerEndpoint, type WorkerRole } from '../../../shared/ipc/protocol.js';

/** ping.sentAt values that make this worker misbehave on cue. */
export const HANG = -1;
export const CRASH = -2;

const endpoint: WorkerEndpoint = new IpcEndpoint(channelToParent());
endpoint.handle('ping', ({ sentAt }) => {
  if (sentAt === HANG) return new Promise<{ receivedAt: number }>(() => undefined);
  if (sentAt === CRASH) process.exit(3);
  return { receivedAt: Date.now() };
});
endpoint.onNotice('shutdown', () => process.exit(0));
process.on('disconnect', () => process.exit(0));
endpoint.notify('ready', { role: process.env[ROLE_ENV] as WorkerRole, pid: process.pid });
