import fs from 'node:fs';
import { DatabaseSync } from 'node:sqlite';
import { parentPort, workerData } from 'node:worker_threads';
import { RECORD_NAMESPACES, RING_NAMESPACES, type RingNamespace, type StateBatch } from './state-store.js';

/**
 * The thread that owns the SQLite file: every disk access of the durable state happens here, so
 * the supervisor's event loop (which answers the proxies' routes) never waits on a disk.
 *
 * WAL with synchronous=NORMAL: a committed batch survives a kill -9 of the process at once (it
 * is in the WAL file); only an OS crash or power loss can take the last batches back (those
 * committed since the last checkpoint), and never leaves the file unreadable.
 *
 * Bounded on disk: SQLite keeps a file at its largest by default (freed pages stay in the file,
 * a WAL is reused but never shortened), so a burst of sessions, or a lower MAX_SESSIONS after a
 * restart, would leave the files at their peak for good. The WAL is checkpointed every
 * WAL_AUTOCHECKPOINT_PAGES and cut back to WAL_SIZE_LIMIT_BYTES; the database uses incremental
 * auto-vacuum, and a write that leaves more than VACUUM_FREE_PAGES free gives them back.
 */

/**
 * WAL pages after which a commit checkpoints (SQLite's default is 1000, 4 MiB): the WAL between
 * two checkpoints is what a running service keeps beside the database.
 */
export const WAL_AUTOCHECKPOINT_PAGES = 256;
/** The size a checkpointed WAL is cut back to (PRAGMA journal_size_limit); without it the WAL keeps its largest size. */
export const WAL_SIZE_LIMIT_BYTES = 1024 * 1024;
/**
 * Free pages a write leaves before they are returned to the file system (incremental vacuum,
 * then a checkpoint that truncates both files): a few sessions' churn reuses its pages instead
 * of shrinking and growing the file on every batch.
 */
export const VACUUM_FREE_PAGES = 256;
/** PRAGMA auto_vacuum's value for INCREMENTAL. */
const AUTO_VACUUM_INCREMENTAL = 2;

/** Written to the meta table; a file with another value is another program's or another format's. */
export const STATE_FORMAT = 'exitpool-state';
export const STATE_FORMAT_VERSION = 1;

export type ThreadRequest =
  | { id: number; type: 'load' }
  | { id: number; type: 'write'; batch: StateBatch }
  | { id: number; type: 'close' };

export type ThreadReply =
  | { id: number; ok: true; loaded?: LoadedRows }
  | { id: number; ok: false; error: string };

export interface LoadedRows {
  records: { ns: string; key: string; value: string }[];
  rings: { ns: string; seq: number; value: string }[];
  movedAside: { path: string; reason: string } | null;
  warnings: string[];
}

/** The file cannot be used as a state file (corrupt, foreign, a newer format). */
class UnusableStateFile extends Error {}

const SCHEMA = `
  CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
  CREATE TABLE IF NOT EXISTS records (ns TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (ns, key)) WITHOUT ROWID;
  CREATE TABLE IF NOT EXISTS rings (ns TEXT NOT NULL, seq INTEGER NOT NULL, value TEXT NOT NULL, PRIMARY KEY (ns, seq)) WITHOUT ROWID;
`;

function openChecked(file: string): DatabaseSync {
  let db: DatabaseSync | undefined;
  try {
    db = new DatabaseSync(file);
    // Checked before anything is written, so a file that is not ours is moved aside as it was.
    const check = db.prepare('PRAGMA quick_check').get() as { quick_check?: string } | undefined;
    if (check?.quick_check !== 'ok') throw new UnusableStateFile(`integrity check: ${String(check?.quick_check)}`);
    const tables = (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as { name: string }[]).map((t) => t.name);
    if (tables.length > 0) {
      if (!tables.includes('meta')) throw new UnusableStateFile(`not an exitpool state file (tables ${tables.slice(0, 5).join(', ')})`);
      const meta = new Map((db.prepare('SELECT key, value FROM meta').all() as { key: string; value: string }[]).map((r) => [r.key, r.value]));
      if (meta.get('format') !== STATE_FORMAT) {
        throw new UnusableStateFile(`not an exitpool state file (format ${JSON.stringify(meta.get('format') ?? null)})`);
      }
      if (meta.get('version') !== String(STATE_FORMAT_VERSION)) {
        throw new UnusableStateFile(`format version ${String(meta.get('version'))}; this exitpool reads version ${STATE_FORMAT_VERSION}`);
      }
    }
    // Takes effect for a new file (before its first table); an older file is converted by convertToIncrementalVacuum().
    db.exec(`PRAGMA auto_vacuum=${AUTO_VACUUM_INCREMENTAL};`);
    db.exec('PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=2000;');
    db.exec(`PRAGMA wal_autocheckpoint=${WAL_AUTOCHECKPOINT_PAGES}; PRAGMA journal_size_limit=${WAL_SIZE_LIMIT_BYTES};`);
    db.exec(SCHEMA);
    if (tables.length === 0) {
      db.prepare('INSERT INTO meta (key, value) VALUES (?, ?), (?, ?)').run('format', STATE_FORMAT, 'version', String(STATE_FORMAT_VERSION));
    }
    return db;
  } catch (error) {
    try {
      db?.close();
    } catch {
      // already unusable
    }
    if (error instanceof UnusableStateFile) throw error;
    // SQLITE_NOTADB, SQLITE_CORRUPT and the like: the file is not a database we can read.
    throw new UnusableStateFile((error as Error).message);
  }
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

/** The statements a batch runs, prepared once per open file. */
function prepareWrites(db: DatabaseSync) {
  return {
    put: db.prepare('INSERT INTO records (ns, key, value) VALUES (?, ?, ?) ON CONFLICT (ns, key) DO UPDATE SET value = excluded.value'),
    del: db.prepare('DELETE FROM records WHERE ns = ? AND key = ?'),
    clear: db.prepare('DELETE FROM records WHERE ns = ?'),
    append: db.prepare('INSERT OR REPLACE INTO rings (ns, seq, value) VALUES (?, ?, ?)'),
    // By count: the newest `capacity` rows stay (seq need not be dense; the audit's ids are shared by two rings).
    trim: db.prepare('DELETE FROM rings WHERE ns = ? AND seq < (SELECT seq FROM rings WHERE ns = ? ORDER BY seq DESC LIMIT 1 OFFSET ?)'),
  };
}

/**
 * A file written before incremental auto-vacuum (STATE_FORMAT_VERSION 1 files made by earlier
 * releases) is converted once with VACUUM. This is SQLite's page layout, not our format: any
 * release reads the file either way, so the version stays. A VACUUM that fails (it needs room
 * for a copy of the file) leaves the file as it was, usable; the next start tries again.
 */
function convertToIncrementalVacuum(db: DatabaseSync): string | null {
  const mode = (db.prepare('PRAGMA auto_vacuum').get() as { auto_vacuum: number }).auto_vacuum;
  if (mode === AUTO_VACUUM_INCREMENTAL) return null;
  try {
    db.exec('VACUUM');
    return null;
  } catch (error) {
    return `the state file could not be converted to incremental vacuum, so it does not shrink yet (${(error as Error).message}); it is tried again at the next start`;
  }
}

/** Gives free pages back once a write has left more than VACUUM_FREE_PAGES of them. */
function releaseFreePages(db: DatabaseSync): void {
  const free = (db.prepare('PRAGMA freelist_count').get() as { freelist_count: number }).freelist_count;
  if (free <= VACUUM_FREE_PAGES) return;
  db.exec('PRAGMA incremental_vacuum;');
  // Now, not at the next automatic checkpoint: the database file is cut to its pages and the
  // WAL, which just received every moved page, to nothing.
  db.exec('PRAGMA wal_checkpoint(TRUNCATE);');
}

class StateThread {
  private db: DatabaseSync | null = null;
  private writes: ReturnType<typeof prepareWrites> | null = null;
  private movedAside: LoadedRows['movedAside'] = null;
  private readonly warnings: string[] = [];

  constructor(private readonly file: string) {}

  private database(): DatabaseSync {
    if (this.db) return this.db;
    try {
      this.db = openChecked(this.file);
    } catch (error) {
      if (!(error instanceof UnusableStateFile)) throw error;
      this.movedAside = { path: moveAside(this.file), reason: error.message };
      this.db = openChecked(this.file);
    }
    const warning = convertToIncrementalVacuum(this.db);
    if (warning) this.warnings.push(warning);
    this.writes = prepareWrites(this.db);
    return this.db;
  }

  load(): LoadedRows {
    const db = this.database();
    const records = db.prepare('SELECT ns, key, value FROM records').all() as LoadedRows['records'];
    const rings = db.prepare('SELECT ns, seq, value FROM rings ORDER BY ns, seq').all() as LoadedRows['rings'];
    return {
      records: records.filter((r) => (RECORD_NAMESPACES as readonly string[]).includes(r.ns)),
      rings: rings.filter((r) => (RING_NAMESPACES as readonly string[]).includes(r.ns)),
      movedAside: this.movedAside,
      warnings: [...this.warnings],
    };
  }

  write(batch: StateBatch): void {
    const db = this.database();
    const { put, del, clear, append, trim } = this.writes as ReturnType<typeof prepareWrites>;
    db.exec('BEGIN');
    try {
      for (const ns of batch.replace) clear.run(ns);
      for (const d of batch.deletes) del.run(d.ns, d.key);
      for (const p of batch.puts) put.run(p.ns, p.key, p.value);
      const touched = new Set<RingNamespace>();
      for (const a of batch.appends) {
        append.run(a.ring, a.seq, a.value);
        touched.add(a.ring);
      }
      for (const ring of touched) trim.run(ring, ring, Math.max(0, batch.capacity[ring] - 1));
      db.exec('COMMIT');
    } catch (error) {
      db.exec('ROLLBACK');
      throw error;
    }
    releaseFreePages(db);
  }

  close(): void {
    this.db?.close();
    this.db = null;
    this.writes = null;
  }
}

function serve(): void {
  const port = parentPort;
  if (!port) return;
  const thread = new StateThread((workerData as { file: string }).file);
  port.on('message', (request: ThreadRequest) => {
    let reply: ThreadReply;
    try {
      switch (request.type) {
        case 'load':
          reply = { id: request.id, ok: true, loaded: thread.load() };
          break;
        case 'write':
          thread.write(request.batch);
          reply = { id: request.id, ok: true };
          break;
        case 'close':
          thread.close();
          reply = { id: request.id, ok: true };
          break;
      }
    } catch (error) {
      reply = { id: request.id, ok: false, error: (error as Error).message };
    }
    port.postMessage(reply);
  });
}

serve();
