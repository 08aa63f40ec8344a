import type { DatabaseSync, StatementSync } from 'node:sqlite';
import { parentPort, workerData } from 'node:worker_threads';
import { errorMessage } from '../../shared/errors/error-message.js';
import { openStateFile, StateFileFailure } from './sqlite-state-file.js';
import { RING_NAMESPACES, SESSION_SLICE_ROWS, SMALL_RECORD_NAMESPACES, type RingNamespace, type StateBatch, type StateOpenFailure } from './state-store.js';

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
 * WAL_AUTOCHECKPOINT_PAGES and cut back to WAL_SIZE_LIMIT_BYTES (sqlite-state-file.ts); the
 * database uses incremental auto-vacuum, and a write that leaves more than VACUUM_FREE_PAGES
 * free gives them back.
 */

/**
 * Free pages a write leaves before they are returned to the file system (incremental vacuum,
 * then a checkpoint that truncates both files): a few sessions' churn reuses its pages instead
 * of shrinking and growing the file on every batch.
 */
export const VACUUM_FREE_PAGES = 256;

export type ThreadRequest =
  | { id: number; type: 'open' }
  /**
   * One slice of the sessions, from the `from`-th oldest. Asked one at a time: the supervisor
   * checks a slice before it asks for the next, so no burst of slices holds its event loop.
   */
  | { id: number; type: 'sessions'; from: number }
  | { id: number; type: 'write'; batch: StateBatch }
  | { id: number; type: 'close' };

export type ThreadReply =
  | { id: number; ok: true; opened?: OpenedRows; sessions?: { keys: string[]; values: string[]; more: boolean } }
  | { id: number; ok: false; error: string; failure?: StateOpenFailure };

export interface OpenedRows {
  records: { ns: string; key: string; value: string }[];
  rings: { ns: string; seq: number; value: string }[];
  movedAside: { path: string; reason: string } | null;
  migrated: { from: number; to: number } | null;
  warnings: string[];
}

/** The statements a batch runs, prepared once per open file. */
function prepareWrites(db: DatabaseSync) {
  return {
    put: db.prepare('INSERT INTO records (ns, key, value) VALUES (?, ?, ?) ON CONFLICT (ns, key) DO UPDATE SET value = excluded.value'),
    del: db.prepare('DELETE FROM records WHERE ns = ? AND key = ?'),
    clear: db.prepare('DELETE FROM records WHERE ns = ?'),
    putSession: db.prepare('INSERT INTO sessions (key, last_seen, value) VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE SET last_seen = excluded.last_seen, value = excluded.value'),
    delSession: db.prepare('DELETE FROM sessions WHERE key = ?'),
    clearSessions: db.prepare('DELETE FROM sessions'),
    append: db.prepare('INSERT OR REPLACE INTO rings (ns, seq, value) VALUES (?, ?, ?)'),
    // By count: the newest `capacity` rows stay (seq need not be dense; the audit's ids are shared by two rings).
    trim: db.prepare('DELETE FROM rings WHERE ns = ? AND seq < (SELECT seq FROM rings WHERE ns = ? ORDER BY seq DESC LIMIT 1 OFFSET ?)'),
  };
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

  constructor(private readonly file: string) {}

  private database(): DatabaseSync {
    if (!this.db) throw new Error('the state file is not open');
    return this.db;
  }

  open(): OpenedRows {
    // Opened once per store; a second open (a tool reading everything again) starts over.
    this.close();
    const opened = openStateFile(this.file);
    this.db = opened.db;
    this.writes = prepareWrites(opened.db);
    const placeholders = SMALL_RECORD_NAMESPACES.map(() => '?').join(', ');
    const records = opened.db.prepare(`SELECT ns, key, value FROM records WHERE ns IN (${placeholders})`).all(...SMALL_RECORD_NAMESPACES) as OpenedRows['records'];
    const rings = opened.db.prepare('SELECT ns, seq, value FROM rings ORDER BY ns, seq').all() as OpenedRows['rings'];
    return {
      records,
      rings: rings.filter((r) => (RING_NAMESPACES as readonly string[]).includes(r.ns)),
      movedAside: opened.movedAside,
      migrated: opened.migrated,
      warnings: opened.warnings,
    };
  }

  /** Every session, oldest seen first: read and ordered at the first slice, kept until the last is taken. */
  private sessionRows: [string, number, string][] | null = null;

  /** The SESSION_SLICE_ROWS sessions from the `from`-th oldest, and whether more follow. */
  sessions(from: number): { keys: string[]; values: string[]; more: boolean } {
    if (from === 0 || this.sessionRows === null) {
      const statement: StatementSync = this.database().prepare('SELECT key, last_seen, value FROM sessions');
      statement.setReturnArrays(true);
      const rows = statement.all() as unknown as [string, number, string][];
      // In JavaScript rather than ORDER BY: SQLite's sorter would spill 100,000 rows of JSON to temporary files.
      this.sessionRows = rows.sort((a, b) => a[1] - b[1]);
    }
    const part = this.sessionRows.slice(from, from + SESSION_SLICE_ROWS);
    const more = from + SESSION_SLICE_ROWS < this.sessionRows.length;
    if (!more) this.sessionRows = null;
    return { keys: part.map((r) => r[0]), values: part.map((r) => r[2]), more };
  }

  write(batch: StateBatch): void {
    const db = this.database();
    const w = this.writes as ReturnType<typeof prepareWrites>;
    db.exec('BEGIN');
    try {
      for (const ns of batch.replace) {
        if (ns === 'sessions') w.clearSessions.run();
        else w.clear.run(ns);
      }
      for (const d of batch.deletes) {
        if (d.ns === 'sessions') w.delSession.run(d.key);
        else w.del.run(d.ns, d.key);
      }
      for (const p of batch.puts) {
        if (p.ns === 'sessions') w.putSession.run(p.key, p.lastSeen ?? 0, p.value);
        else w.put.run(p.ns, p.key, p.value);
      }
      const touched = new Set<RingNamespace>();
      for (const a of batch.appends) {
        w.append.run(a.ring, a.seq, a.value);
        touched.add(a.ring);
      }
      for (const ring of touched) w.trim.run(ring, ring, Math.max(0, batch.capacity[ring] - 1));
      db.exec('COMMIT');
    } catch (error) {
      db.exec('ROLLBACK');
      throw error;
    }
    releaseFreePages(db);
  }

  close(): void {
    this.sessionRows = null;
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
        case 'open':
          reply = { id: request.id, ok: true, opened: thread.open() };
          break;
        case 'sessions':
          reply = { id: request.id, ok: true, sessions: thread.sessions(request.from) };
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
      reply = { id: request.id, ok: false, error: errorMessage(error), ...(error instanceof StateFileFailure ? { failure: error.failure } : {}) };
    }
    port.postMessage(reply);
  });
}

serve();
