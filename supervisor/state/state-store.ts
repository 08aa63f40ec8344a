/**
 * The durable state's storage, behind the one small interface a second backend (a shared Redis)
 * implements too. Two shapes cover everything the supervisor keeps:
 *
 * - records: a namespace of key → value, written by upsert and delete (sessions, exit
 *   assignments, exit bans, instance health);
 * - rings: a namespace of numbered values kept newest-last and trimmed to a capacity (the audit
 *   trail, the stats history).
 *
 * Values are JSON text: the store never interprets them, and the code that reads them back
 * validates every field (a state file is input like any other).
 */

export const RECORD_NAMESPACES = ['sessions', 'exit-assignments', 'exit-bans', 'health'] as const;
export type RecordNamespace = (typeof RECORD_NAMESPACES)[number];

export const RING_NAMESPACES = ['audit-session', 'audit-operator', 'stats-fine', 'stats-long'] as const;
export type RingNamespace = (typeof RING_NAMESPACES)[number];

/** One flush: applied atomically (all of it or none of it is on disk after a crash). */
export interface StateBatch {
  /** Namespaces emptied before the puts of this batch apply (a small namespace written whole). */
  replace: RecordNamespace[];
  puts: { ns: RecordNamespace; key: string; value: string }[];
  deletes: { ns: RecordNamespace; key: string }[];
  /** seq grows within a ring; after the appends only the newest `capacity` stay. */
  appends: { ring: RingNamespace; seq: number; value: string }[];
  capacity: Record<RingNamespace, number>;
}

export interface StoredState {
  records: Record<RecordNamespace, Map<string, string>>;
  /** Oldest first. */
  rings: Record<RingNamespace, { seq: number; value: string }[]>;
  /** Set when the file found could not be used: where it was moved and why. */
  movedAside: { path: string; reason: string } | null;
  /** What the store could not do at load that leaves the state usable (said in the log). */
  warnings: string[];
}

export interface StateStore {
  /** Where the state lives, for logs (a path, or a URL without its credentials). */
  readonly location: string;
  /** Reads everything, once, at start; a store that cannot be read is moved aside and starts empty. */
  load(): Promise<StoredState>;
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
    warnings: [],
  };
}

/** The store failed to write or read (not a corrupt file: that is moved aside, not thrown). */
export class StateStoreError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StateStoreError';
  }
}
