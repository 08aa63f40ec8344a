import type { Logger } from '../logger.js';
import type { Config } from '../config/index.js';
import type { WorkerEndpoint, WorkerRole } from '../ipc/protocol.js';

/** What every worker role receives from the entry point. */
export interface WorkerContext {
  role: WorkerRole;
  slot: number;
  config: Config;
  endpoint: WorkerEndpoint;
  log: Logger;
}

/** A running worker role: closes its listeners and timers within the grace. */
export interface RunningWorker {
  stop(graceMs: number): Promise<void>;
}
