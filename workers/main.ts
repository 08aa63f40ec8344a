// Entry point of every forked worker process (proxy and API). The supervisor starts it
// through node:cluster with the role, slot and configuration in the environment.
import { decodeWorkerConfig, WORKER_CONFIG_ENV } from '../shared/config/index.js';
import { DEFAULT_IPC_TIMEOUT_MS, IpcEndpoint, channelToParent } from '../shared/ipc/index.js';
import { ROLE_ENV, SLOT_ENV, WORKER_REQUEST_TIMEOUTS_MS, type WorkerEndpoint, type WorkerRole } from '../shared/ipc/protocol.js';
import { createRootLogger } from '../shared/logger.js';
import { ListenError } from '../shared/worker/listen-error.js';
import type { RunningWorker, WorkerContext } from '../shared/worker/worker-context.js';

/** EX_CONFIG: the worker cannot start as configured. */
const EXIT_CONFIG = 78;

async function main(): Promise<void> {
  const role = process.env[ROLE_ENV] as WorkerRole | undefined;
  if (role !== 'proxy' && role !== 'api') {
    console.error(`exitpool worker started without a valid ${ROLE_ENV}; workers are started by the supervisor`);
    process.exit(2);
  }
  const config = decodeWorkerConfig(process.env[WORKER_CONFIG_ENV]);
  const slot = Number(process.env[SLOT_ENV] ?? '0');
  const log = createRootLogger(config.logLevel, config.logFormat).child({ worker: role, slot });
  const endpoint: WorkerEndpoint = new IpcEndpoint(channelToParent(), DEFAULT_IPC_TIMEOUT_MS, WORKER_REQUEST_TIMEOUTS_MS);
  endpoint.handle('ping', () => ({ receivedAt: Date.now() }));

  // A worker never outlives its supervisor: when the IPC channel closes, it exits.
  process.on('disconnect', () => {
    log.warn('supervisor gone; exiting');
    process.exit(0);
  });
  const ctx: WorkerContext = { role, slot, config, endpoint, log };
  let running: RunningWorker;
  try {
    if (role === 'proxy') {
      const { startProxyWorker } = await import('./proxy-worker/proxy-worker.js');
      running = await startProxyWorker(ctx);
    } else {
      const { startApiWorker } = await import('./api/api-worker.js');
      running = await startApiWorker(ctx);
    }
  } catch (e) {
    if (!(e instanceof ListenError)) throw e;
    // The supervisor ends the service with this one line; re-forking could not fix it.
    endpoint.notify('start-failed', { setting: e.setting, message: e.message });
    await endpoint.drain();
    process.exit(EXIT_CONFIG);
  }
  let stopping = false;
  const stop = async (graceMs: number): Promise<void> => {
    if (stopping) return;
    stopping = true;
    await running.stop(graceMs);
    await endpoint.drain();
    process.exit(0);
  };
  endpoint.onNotice('shutdown', ({ graceMs }) => void stop(graceMs));
  // The supervisor owns shutdown; a terminal's Ctrl-C reaches the whole process group, so a
  // worker ignores SIGINT/SIGTERM and waits for the supervisor's shutdown notice instead.
  process.on('SIGINT', () => undefined);
  process.on('SIGTERM', () => undefined);
  endpoint.notify('ready', { role, pid: process.pid });
}

main().catch((e: unknown) => {
  console.error('exitpool worker failed to start:', e);
  process.exit(1);
});
