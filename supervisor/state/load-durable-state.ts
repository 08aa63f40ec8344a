import { errorMessage } from '../../shared/errors/error-message.js';
import type { Logger } from '../../shared/logger.js';
import { StartupError } from '../startup/startup-error.js';
import { checkEarlyState, SessionChecker, type EarlyState, type StoredSessions } from './durable-state.js';
import { StateOpenError, type StateOpenFailure, type StateStore } from './state-store.js';

/**
 * Start-up's two reads of the durable state:
 *
 * 1. `openDurableState`: opens the store (a store proven corrupt is moved aside, an older format
 *    migrated) and reads, checked, what the pool needs before its first tor starts: exit
 *    assignments and bans, health, the audit trail and the stats history. Small and quick.
 * 2. `loadStoredSessions`: reads the sessions in slices, each checked as it arrives, so that the
 *    event loop serves the tors' start meanwhile; resolves with the newest MAX_SESSIONS of them.
 *
 * A store that cannot be opened (unreadable, another program's, newer, a failed migration, an
 * unreachable Redis, a Node without node:sqlite) refuses the start with a StartupError naming
 * the cause and what to do: what was found is left exactly as it was.
 */

/** The refusal of a start on a Node without node:sqlite (said before anything else runs, and by the store). */
export function withoutSqliteRefusal(detail = `this Node (${process.version}) has no node:sqlite, which the SQLite state needs`): StartupError {
  return new StartupError(
    'STATE_STORE',
    `${detail}: run exitpool with Node 24 or later (npm ci installs one in node_modules/.bin; bin/exitpool, pm2 and the systemd unit use it), or set STATE_STORE=none to run without a durable state`,
  );
}

/** The setting to change, and the line that says why, for each failure. */
function refusal(store: StateStore, f: StateOpenFailure): StartupError {
  const { location } = store;
  const sqlite = store.backend === 'sqlite';
  const kept = 'it is left as it is';
  switch (f.kind) {
    case 'runtime':
      return withoutSqliteRefusal(f.detail);
    case 'access':
      return sqlite
        ? new StartupError('DATA_DIR', `the durable state at ${location} cannot be opened: permission denied (${f.detail}); ${kept}: give this user (uid ${process.getuid?.() ?? '?'}) read and write access to it and its directory`)
        : new StartupError('STATE_STORE', `Redis refused this service: ${f.detail}; check the password or the ACL user in STATE_STORE`);
    case 'io':
      return sqlite
        ? new StartupError('DATA_DIR', `reading the durable state at ${location} failed (${f.detail}); ${kept}: check the disk (free space, dmesg) and start again`)
        : new StartupError('STATE_STORE', `reading the durable state failed: ${f.detail}`);
    case 'locked':
      return new StartupError('DATA_DIR', `the durable state at ${location} is locked by another process (${f.detail}): is another exitpool running on this DATA_DIR?`);
    case 'foreign':
      return new StartupError(sqlite ? 'DATA_DIR' : 'STATE_STORE', `${f.detail}; ${kept}: move it away, or point ${sqlite ? 'DATA_DIR' : 'STATE_STORE (another key prefix: the URL’s path)'} elsewhere`);
    case 'newer':
      return new StartupError(
        sqlite ? 'DATA_DIR' : 'STATE_STORE',
        `the durable state at ${location} has format version ${f.found}, written by a newer exitpool; this one reads up to version ${f.newest}: run the newer release, or move the state away to start this one empty (${kept})`,
      );
    case 'migration':
      return new StartupError(
        sqlite ? 'DATA_DIR' : 'STATE_STORE',
        `the durable state at ${location} could not be migrated from format version ${f.from} to ${f.to} (${f.detail}); ${sqlite ? 'the migration is one transaction, so the file is as it was' : 'the steps done so far are recorded and run again'}: report it, and run the release that wrote it meanwhile`,
      );
    case 'unreachable':
      return new StartupError('STATE_STORE', `${f.detail}; start Redis or fix STATE_STORE, or set STATE_STORE=sqlite or none`);
  }
}

async function refuse(store: StateStore, error: unknown): Promise<never> {
  await store.close().catch(() => undefined);
  if (error instanceof StateOpenError) throw refusal(store, error.failure);
  throw new StartupError('STATE_STORE', `the durable state at ${store.location} cannot be read (${errorMessage(error)})`);
}

/**
 * Opens the store and reads everything but the sessions (step 1 above). Says loudly when what
 * was found was moved aside, and when it was migrated; records that fail their checks are left
 * out and counted. Throws StartupError (the store closed) when it cannot be opened.
 */
export async function openDurableState(store: StateStore, log: Logger): Promise<EarlyState> {
  let stored;
  try {
    stored = await store.open();
  } catch (error) {
    return refuse(store, error);
  }
  if (stored.movedAside) {
    log.error('the durable state was proven corrupt: moved aside, starting with an empty state (credentials in auth.json are not part of it)', {
      store: store.location,
      movedTo: stored.movedAside.path,
      reason: stored.movedAside.reason,
    });
  }
  if (stored.migrated) log.warn('durable state migrated to this release’s format', { store: store.location, from: stored.migrated.from, to: stored.migrated.to });
  for (const warning of stored.warnings) log.warn('durable state: the store needs attention', { store: store.location, warning });
  const early = checkEarlyState(stored);
  if (Object.keys(early.skipped).length > 0) {
    log.warn('durable state records that failed their checks were left out', { store: store.location, skipped: early.skipped });
  }
  return early;
}

/**
 * After openDurableState: the sessions, the newest `limit` (MAX_SESSIONS) of them, each checked
 * as its slice arrives (step 2 above). Throws StartupError (the store closed) when they cannot
 * be read.
 */
export async function loadStoredSessions(store: StateStore, log: Logger, limit: number): Promise<StoredSessions> {
  const checker = new SessionChecker();
  try {
    await store.readSessions((rows) => checker.add(rows));
  } catch (error) {
    return refuse(store, error);
  }
  const sessions = checker.finish(limit);
  if (sessions.skipped > 0) log.warn('durable state records that failed their checks were left out', { store: store.location, skipped: { sessions: sessions.skipped } });
  return sessions;
}
