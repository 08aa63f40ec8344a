import type { DatabaseSync } from 'node:sqlite';
import { errorMessage } from '../../shared/errors/error-message.js';

/**
 * The SQLite state file's format versions, and how a file of each older version is brought to
 * the current one. A release that changes the format adds one migration here; the version this
 * release writes is derived from the list, so a format change cannot ship without its migration.
 * Every migration is tested from the committed file of version 1 (test/fixtures/state-v1/), in
 * order, with what the file held checked after each (test/unit/state-migrations.test.ts).
 *
 * - 1: one `records` table for every record namespace, `rings`, `meta` (format, version).
 * - 2: sessions in a `sessions` table of their own with their last-seen time as a column, so a
 *   start reads everything else first (the pool needs it before its first tor starts) and
 *   hands the sessions over afterwards, oldest first, without reading their JSON to order them.
 */
export interface SqliteMigration {
  /** The version a file has once this ran (the one before is `to - 1`). */
  readonly to: number;
  readonly summary: string;
  /** Runs inside the migration's transaction: everything or nothing of it reaches the file. */
  apply(db: DatabaseSync): void;
}

/** A session's last-seen time from its JSON (0 when the record cannot say: it fails its checks when read anyway). */
const LAST_SEEN_OF_VALUE = `CASE WHEN json_valid(value) AND json_type(value, '$.last_seen') IN ('integer', 'real') THEN CAST(json_extract(value, '$.last_seen') AS INTEGER) ELSE 0 END`;

export const SESSIONS_TABLE = 'CREATE TABLE sessions (key TEXT PRIMARY KEY, last_seen INTEGER NOT NULL, value TEXT NOT NULL)';

export const SQLITE_MIGRATIONS: readonly SqliteMigration[] = [
  {
    to: 2,
    summary: 'sessions move to a table of their own, with their last-seen time',
    apply(db) {
      db.exec(SESSIONS_TABLE);
      db.exec(`INSERT INTO sessions (key, last_seen, value) SELECT key, ${LAST_SEEN_OF_VALUE}, value FROM records WHERE ns = 'sessions'`);
      db.exec("DELETE FROM records WHERE ns = 'sessions'");
    },
  },
];

/** The version this release writes: 1, plus one per migration. */
export function currentVersion(migrations: readonly SqliteMigration[]): number {
  return 1 + migrations.length;
}

/** A migration failed; its transaction was rolled back, so the file is as it was. */
export class MigrationFailed extends Error {
  constructor(
    readonly from: number,
    readonly to: number,
    failure: unknown,
  ) {
    super(`migration to version ${to} failed: ${errorMessage(failure)}`);
    this.name = 'MigrationFailed';
  }
}

/**
 * Brings a file of version `found` (older than the current one) to the current version, in one
 * transaction: every step and the new version in `meta`, or nothing. Returns the versions.
 */
export function migrateStateFile(db: DatabaseSync, found: number, migrations: readonly SqliteMigration[] = SQLITE_MIGRATIONS): { from: number; to: number } {
  const target = currentVersion(migrations);
  db.exec('BEGIN IMMEDIATE');
  let at = found;
  try {
    for (const m of migrations.slice(found - 1)) {
      if (m.to !== at + 1) throw new Error(`the migrations are out of order: ${m.to} after ${at}`);
      m.apply(db);
      at = m.to;
    }
    db.prepare("UPDATE meta SET value = ? WHERE key = 'version'").run(String(target));
    db.exec('COMMIT');
  } catch (error) {
    db.exec('ROLLBACK');
    throw new MigrationFailed(found, Math.min(at + 1, target), error);
  }
  return { from: found, to: target };
}
