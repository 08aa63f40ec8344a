/**
 * The durable state's storage, behind the one small interface both backends (SQLite, Redis)
 * implement. Two shapes cover everything the supervisor keeps:
 *
 * - records: a namespace of key → value, written by upsert and delete (sessions, exit
 *   assignments, exit bans, instance health);
 * - rings: a namespace of numbered values kept newest-last and trimmed to a capacity (the audit
 *   trail, the stats history).
 *
 * Values are JSON text: the store never interprets them, and the code that reads them back
 * validates every field (a state file is input like any other).
 *
 * Reading is split in two so that a start does not wait on the sessions: `open()` reads what the
 * pool needs before its first tor starts (small: one record per instance, the bans, the rings),
 * `readSessions()` then hands the sessions over in slices.
 */

export const RECORD_NAMESPACES = ['sessions', 'exit-assignments', 'exit-bans', 'health'] as const;
export type RecordNamespace = (typeof RECORD_NAMESPACES)[number];
/** Every record namespace but the sessions: what `open()` reads. */
export const SMALL_RECORD_NAMESPACES = ['exit-assignments', 'exit-bans', 'health'] as const satisfies readonly RecordNamespace[];

export const RING_NAMESPACES = ['audit-session', 'audit-operator', 'stats-fine', 'stats-long'] as const;
export type RingNamespace = (typeof RING_NAMESPACES)[number];

/** One put. A session's carries when it was last seen, so that a store can hand sessions back oldest first without reading their JSON. */
export interface RecordPut {
  ns: RecordNamespace;
  key: string;
  value: string;
  /** Sessions only: epoch milliseconds. */
  lastSeen?: number;
}

/** One flush: applied atomically (all of it or none of it is on disk after a crash). */
export interface StateBatch {
  /** Namespaces emptied before the puts of this batch apply (a small namespace written whole). */
  replace: RecordNamespace[];
  puts: RecordPut[];
  deletes: { ns: RecordNamespace; key: string }[];
  /** seq grows within a ring; after the appends only the newest `capacity` stay. */
  appends: { ring: RingNamespace; seq: number; value: string }[];
  capacity: Record<RingNamespace, number>;
}

export interface StoredState {
  /** After `open()` the sessions namespace is empty: they come through `readSessions()`. */
  records: Record<RecordNamespace, Map<string, string>>;
  /** Oldest first. */
  rings: Record<RingNamespace, { seq: number; value: string }[]>;
  /** Set when what was found was proven corrupt: where it was moved and why. */
  movedAside: { path: string; reason: string } | null;
  /** Set when it was written in an older format and migrated at this open. */
  migrated: { from: number; to: number } | null;
  /** What the store could not do at open that leaves the state usable (said in the log). */
  warnings: string[];
}

/** Session records as a store hands them over: two parallel lists, cheap to pass between threads. */
export interface SessionRows {
  keys: string[];
  values: string[];
}

/** How many session rows one slice carries at most: checking one takes a few milliseconds of the event loop. */
export const SESSION_SLICE_ROWS = 5000;

export interface StateStore {
  /** Which backend: a refusal names the setting to change (DATA_DIR for the file, STATE_STORE for Redis). */
  readonly backend: 'sqlite' | 'redis';
  /** Where the state lives, for logs (a path, or a URL without its credentials). */
  readonly location: string;
  /**
   * Opens the store once, at start: checks what it finds (a store proven corrupt is moved
   * aside and starts empty; one that cannot be read, is not ours or is newer throws
   * StateOpenError and is left as it is), migrates an older format, and reads everything but
   * the sessions.
   */
  open(): Promise<StoredState>;
  /**
   * After `open()`: the session records, in slices of at most SESSION_SLICE_ROWS, each passed
   * to `onSlice` as it arrives. Oldest seen first where the store knows (SQLite); callers must
   * not rely on the order. Resolves with the number of rows handed over.
   */
  readSessions(onSlice: (rows: SessionRows) => void): Promise<number>;
  /** Applies one batch atomically; resolves once it is durable against a crash of this process. */
  write(batch: StateBatch): Promise<void>;
  close(): Promise<void>;
}

export function emptyBatch(capacity: Record<RingNamespace, number>): StateBatch {
  return { replace: [], puts: [], deletes: [], appends: [], capacity };
}

export function batchIsEmpty(b: StateBatch): boolean {
  return b.replace.length === 0 && b.puts.length === 0 && b.deletes.length === 0 && b.appends.length === 0;
}

export function emptyStoredState(): StoredState {
  return {
    records: { sessions: new Map(), 'exit-assignments': new Map(), 'exit-bans': new Map(), health: new Map() },
    rings: { 'audit-session': [], 'audit-operator': [], 'stats-fine': [], 'stats-long': [] },
    movedAside: null,
    migrated: null,
    warnings: [],
  };
}

/** Opens a store and reads everything it holds, sessions included (tests, tools, the benchmark). */
export async function readWholeState(store: StateStore): Promise<StoredState> {
  const state = await store.open();
  await store.readSessions((rows) => {
    rows.keys.forEach((key, i) => state.records.sessions.set(key, rows.values[i] as string));
  });
  return state;
}

/** A write or a read after the open failed (the writer retries; a read at start refuses it). */
export class StateStoreError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StateStoreError';
  }
}

/**
 * Why a store could not be opened. Each leaves what was found as it was: only a store proven
 * corrupt is moved aside (and that is not a failure: the start goes on, empty).
 */
export type StateOpenFailure =
  /** This Node has no node:sqlite (older than the supported release). */
  | { kind: 'runtime'; detail: string }
  /** Permission denied, a read-only file or file system, a Redis password refused. */
  | { kind: 'access'; detail: string }
  /** An I/O error, a full disk, no memory. */
  | { kind: 'io'; detail: string }
  /** Another process holds the file (another exitpool on the same DATA_DIR). */
  | { kind: 'locked'; detail: string }
  /** Another program's data, not a state this service wrote. */
  | { kind: 'foreign'; detail: string }
  /** A format version newer than this release reads. */
  | { kind: 'newer'; found: number; newest: number }
  /** An older format whose migration failed (rolled back: the store is as it was). */
  | { kind: 'migration'; from: number; to: number; detail: string }
  /** Redis could not be reached. */
  | { kind: 'unreachable'; detail: string };

export class StateOpenError extends Error {
  constructor(readonly failure: StateOpenFailure) {
    super(describeOpenFailure(failure));
    this.name = 'StateOpenError';
  }
}

function describeOpenFailure(f: StateOpenFailure): string {
  switch (f.kind) {
    case 'newer':
      return `format version ${f.found}, newer than this release reads (${f.newest})`;
    case 'migration':
      return `migrating from format version ${f.from} to ${f.to} failed: ${f.detail}`;
    default:
      return f.detail;
  }
}
