import type { Logger } from '../../shared/logger.js';
import { StartupError } from '../startup/startup-error.js';
import { checkStoredState, type RestoredState } from './durable-state.js';
import type { StateStore } from './state-store.js';

/**
 * Reads the durable state at start. A file that cannot be used has already been moved aside by
 * the store: that is said loudly (an error line naming both paths), and the service starts empty.
 * Records that fail their checks are left out and counted. A store that cannot be opened at all
 * (DATA_DIR not writable) refuses the start with the setting to change, rather than running
 * without the state it was asked to keep.
 */
export async function loadDurableState(store: StateStore, log: Logger): Promise<RestoredState> {
  let stored;
  try {
    stored = await store.load();
  } catch (error) {
    await store.close().catch(() => undefined);
    throw new StartupError('STATE_STORE', `the durable state at ${store.location} cannot be opened (${(error as Error).message}); fix it (DATA_DIR's permissions, or the Redis server), or set STATE_STORE=none`);
  }
  if (stored.movedAside) {
    log.error('the durable state file could not be used: moved aside, starting with an empty state (credentials in auth.json are not part of it)', {
      store: store.location,
      movedTo: stored.movedAside.path,
      reason: stored.movedAside.reason,
    });
  }
  for (const warning of stored.warnings) log.warn('durable state: the store needs attention', { store: store.location, warning });
  const restored = checkStoredState(stored);
  const skipped = Object.entries(restored.skipped);
  if (skipped.length > 0) {
    log.warn('durable state records that failed their checks were left out', { store: store.location, skipped: Object.fromEntries(skipped) });
  }
  return restored;
}
