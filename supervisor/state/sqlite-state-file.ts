import fs from 'node:fs';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { errorMessage } from '../../shared/errors/error-message.js';
import { currentVersion, migrateStateFile, MigrationFailed, SESSIONS_TABLE, SQLITE_MIGRATIONS, type SqliteMigration } from './sqlite-migrations.js';
import type { StateOpenFailure } from './state-store.js';

/**
 * Opening `DATA_DIR/state.db`: what is found is judged before anything is written to it.
 *
 * - proven corrupt (SQLite says it is not a database or is malformed, or `PRAGMA quick_check`
 *   fails, or our own `meta` is garbled): moved aside with its `-wal`/`-shm`, and a new file made;
 * - of an older format version: migrated in one transaction (sqlite-migrations.ts);
 * - unreadable (permission, read-only, I/O error, locked by another process), another program's,
 *   or of a newer format version: left exactly as it is, and the open fails (StateFileFailure)
 *   so that the start stops with a line saying which.
 *
 * The file is created 0600 before SQLite sees it: SQLite makes its files 0644 less the umask,
 * and gives the `-wal` and `-shm` files the database file's mode.
 */

/** Written to the meta table; a file with another value is another program's. */
export const STATE_FORMAT = 'exitpool-state';
/** The version this release writes and reads; older ones are migrated. */
export const STATE_FORMAT_VERSION = currentVersion(SQLITE_MIGRATIONS);
export const STATE_FILE_MODE = 0o600;

/**
 * WAL pages after which a commit checkpoints (SQLite's default is 1000, 4 MiB): the WAL between
 * two checkpoints is what a running service keeps beside the database.
 */
export const WAL_AUTOCHECKPOINT_PAGES = 256;
/** The size a checkpointed WAL is cut back to (PRAGMA journal_size_limit); without it the WAL keeps its largest size. */
export const WAL_SIZE_LIMIT_BYTES = 1024 * 1024;
/** PRAGMA auto_vacuum's value for INCREMENTAL. */
export const AUTO_VACUUM_INCREMENTAL = 2;
/** How long a statement waits for a lock another connection holds before it is reported as locked. */
const BUSY_TIMEOUT_MS = 2000;

const OUR_TABLES = ['meta', 'records', 'rings', 'sessions'];

const SCHEMA = `
  CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
  CREATE TABLE records (ns TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (ns, key)) WITHOUT ROWID;
  CREATE TABLE rings (ns TEXT NOT NULL, seq INTEGER NOT NULL, value TEXT NOT NULL, PRIMARY KEY (ns, seq)) WITHOUT ROWID;
  ${SESSIONS_TABLE};
`;

/** The open failed and the file was left as it is. */
export class StateFileFailure extends Error {
  constructor(readonly failure: StateOpenFailure) {
    super(failure.kind === 'newer' ? `format version ${failure.found}, newer than ${failure.newest}` : failure.detail);
    this.name = 'StateFileFailure';
  }
}

/** What was found is proven corrupt: it is moved aside. */
class CorruptStateFile extends Error {}

/** SQLite's primary result codes (the low byte of node:sqlite's `errcode`). */
const SQLITE = { PERM: 3, BUSY: 5, LOCKED: 6, NOMEM: 7, READONLY: 8, IOERR: 10, CORRUPT: 11, FULL: 13, CANTOPEN: 14, AUTH: 23, NOTADB: 26 } as const;

/** Sorts an error of node:sqlite or of the file system into corrupt or one of the failures that keep the file. */
function classify(error: unknown, file: string): CorruptStateFile | StateFileFailure {
  if (error instanceof CorruptStateFile || error instanceof StateFileFailure) return error;
  // The refusal names the file; this says what happened to it.
  const detail = errorMessage(error);
  const errcode = (error as { errcode?: unknown }).errcode;
  if (typeof errcode === 'number') {
    switch (errcode & 0xff) {
      case SQLITE.CORRUPT:
      case SQLITE.NOTADB:
        return new CorruptStateFile(errorMessage(error));
      case SQLITE.PERM:
      case SQLITE.READONLY:
      case SQLITE.CANTOPEN:
      case SQLITE.AUTH:
        return new StateFileFailure({ kind: 'access', detail });
      case SQLITE.BUSY:
      case SQLITE.LOCKED:
        return new StateFileFailure({ kind: 'locked', detail });
      default:
        return new StateFileFailure({ kind: 'io', detail });
    }
  }
  const code = (error as NodeJS.ErrnoException).code;
  if (code === 'EACCES' || code === 'EPERM' || code === 'EROFS') return new StateFileFailure({ kind: 'access', detail });
  if (code === 'EISDIR') return new StateFileFailure({ kind: 'foreign', detail: `${file} is a directory` });
  return new StateFileFailure({ kind: 'io', detail });
}

/** Creates the file 0600 when it does not exist (an existing one keeps its mode: DATA_DIR's check made it private). */
function createPrivately(file: string): void {
  fs.closeSync(fs.openSync(file, fs.constants.O_CREAT | fs.constants.O_RDWR, STATE_FILE_MODE));
}

/** Moves the file and its WAL and shared-memory companions aside; returns the new path. */
function moveAside(file: string): string {
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const target = `${file}.unusable-${stamp}`;
  for (const suffix of ['', '-wal', '-shm']) {
    if (fs.existsSync(file + suffix)) fs.renameSync(file + suffix, target + suffix);
  }
  return target;
}

function closeQuietly(db: DatabaseSync | undefined): void {
  try {
    db?.close();
  } catch {
    // already unusable
  }
}

export interface OpenedStateFile {
  db: DatabaseSync;
  movedAside: { path: string; reason: string } | null;
  migrated: { from: number; to: number } | null;
  warnings: string[];
}

/** Reads the meta table of a file that has one; null when its `meta` is not ours (other columns). */
function readMeta(db: DatabaseSync): Map<string, string> | null {
  try {
    return new Map((db.prepare('SELECT key, value FROM meta').all() as { key: unknown; value: unknown }[]).map((r) => [String(r.key), String(r.value)]));
  } catch {
    return null;
  }
}

/** A file whose tables are ours and hold nothing (a first start that stopped before it wrote its meta): as good as new. */
function holdsNothing(db: DatabaseSync, tables: string[]): boolean {
  return tables.every((t) => OUR_TABLES.includes(t)) && tables.every((t) => db.prepare(`SELECT 1 FROM "${t}" LIMIT 1`).get() === undefined);
}

/**
 * Judges an open database; returns the version it holds (null: nothing yet, to be created).
 * Throws CorruptStateFile or StateFileFailure.
 */
function judge(db: DatabaseSync, file: string, newest: number): number | null {
  // Checked before anything is written, so a file that is refused or moved aside is as it was.
  const check = db.prepare('PRAGMA quick_check').get() as { quick_check?: string } | undefined;
  if (check?.quick_check !== 'ok') throw new CorruptStateFile(`integrity check: ${String(check?.quick_check)}`);
  const tables = (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as { name: string }[]).map((t) => t.name);
  if (tables.length === 0) return null;
  const meta = tables.includes('meta') ? (readMeta(db) ?? new Map([['format', 'another program’s meta table']])) : new Map<string, string>();
  if (meta.get('format') !== STATE_FORMAT) {
    if (meta.size === 0 && holdsNothing(db, tables)) return null;
    const what = tables.includes('meta') ? `format ${JSON.stringify(meta.get('format') ?? null)}` : `tables ${tables.slice(0, 5).join(', ')}`;
    throw new StateFileFailure({ kind: 'foreign', detail: `${file} is not an exitpool state file (${what})` });
  }
  const raw = meta.get('version') ?? '';
  if (!/^[1-9][0-9]{0,8}$/.test(raw)) throw new CorruptStateFile(`format version ${JSON.stringify(raw)} is not a version`);
  const version = Number(raw);
  if (version > newest) throw new StateFileFailure({ kind: 'newer', found: version, newest });
  return version;
}

function applyPragmas(db: DatabaseSync): void {
  db.exec('PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;');
  db.exec(`PRAGMA wal_autocheckpoint=${WAL_AUTOCHECKPOINT_PAGES}; PRAGMA journal_size_limit=${WAL_SIZE_LIMIT_BYTES};`);
}

/** Opens and judges once; throws CorruptStateFile or StateFileFailure. */
function openOnce(file: string, migrations: readonly SqliteMigration[]): { db: DatabaseSync; migrated: { from: number; to: number } | null } {
  let db: DatabaseSync | undefined;
  try {
    createPrivately(file);
    db = new DatabaseSync(file);
    db.exec(`PRAGMA busy_timeout=${BUSY_TIMEOUT_MS};`);
    const newest = currentVersion(migrations);
    const version = judge(db, file, newest);
    let migrated: { from: number; to: number } | null = null;
    if (version === null) {
      // Takes effect before the first table only; an older file is converted by convertToIncrementalVacuum().
      db.exec(`PRAGMA auto_vacuum=${AUTO_VACUUM_INCREMENTAL};`);
      applyPragmas(db);
      db.exec('BEGIN IMMEDIATE');
      try {
        for (const t of ['meta', 'records', 'rings', 'sessions']) db.exec(`DROP TABLE IF EXISTS "${t}"`);
        db.exec(SCHEMA);
        db.prepare('INSERT INTO meta (key, value) VALUES (?, ?), (?, ?)').run('format', STATE_FORMAT, 'version', String(newest));
        db.exec('COMMIT');
      } catch (error) {
        db.exec('ROLLBACK');
        throw error;
      }
    } else {
      applyPragmas(db);
      if (version < newest) {
        try {
          migrated = migrateStateFile(db, version, migrations);
        } catch (error) {
          if (!(error instanceof MigrationFailed)) throw error;
          throw new StateFileFailure({ kind: 'migration', from: error.from, to: error.to, detail: error.message });
        }
      }
    }
    return { db, migrated };
  } catch (error) {
    closeQuietly(db);
    throw classify(error, file);
  }
}

/**
 * A file written before incremental auto-vacuum (STATE_FORMAT_VERSION 1 files made by the first
 * releases) is converted once with VACUUM. This is SQLite's page layout, not our format. A VACUUM
 * that fails (it needs room for a copy of the file) leaves the file as it was, usable; the next
 * start tries again.
 */
function convertToIncrementalVacuum(db: DatabaseSync): string | null {
  const mode = (db.prepare('PRAGMA auto_vacuum').get() as { auto_vacuum: number }).auto_vacuum;
  if (mode === AUTO_VACUUM_INCREMENTAL) return null;
  try {
    db.exec(`PRAGMA auto_vacuum=${AUTO_VACUUM_INCREMENTAL}; VACUUM;`);
    return null;
  } catch (error) {
    return `the state file could not be converted to incremental vacuum, so it does not shrink yet (${errorMessage(error)}); it is tried again at the next start`;
  }
}

/**
 * Opens the state file, moving it aside first when it is proven corrupt, migrating it when it
 * is older. Throws StateFileFailure (the file is left as it is) for everything else.
 */
export function openStateFile(file: string, migrations: readonly SqliteMigration[] = SQLITE_MIGRATIONS): OpenedStateFile {
  let movedAside: OpenedStateFile['movedAside'] = null;
  try {
    // The service prepared DATA_DIR before (supervisor/data-directory.ts); a tool or a test may not have.
    fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  } catch (error) {
    throw classify(error, path.dirname(file));
  }
  let opened;
  try {
    opened = openOnce(file, migrations);
  } catch (error) {
    if (!(error instanceof CorruptStateFile)) throw error;
    try {
      movedAside = { path: moveAside(file), reason: error.message };
    } catch (moveError) {
      throw classify(moveError, file);
    }
    opened = openOnce(file, migrations);
  }
  const warnings: string[] = [];
  const warning = convertToIncrementalVacuum(opened.db);
  if (warning) warnings.push(warning);
  return { db: opened.db, movedAside, migrated: opened.migrated, warnings };
}
