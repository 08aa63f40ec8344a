import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { errorMessage } from '../../shared/errors/error-message.js';
import type { OpenedRows, ThreadReply, ThreadRequest } from './sqlite-state-thread.js';
import {
  emptyStoredState,
  StateOpenError,
  StateStoreError,
  type RecordNamespace,
  type RingNamespace,
  type SessionRows,
  type StateBatch,
  type StateStore,
  type StoredState,
} from './state-store.js';

/** The state file inside DATA_DIR. */
export const STATE_FILE_NAME = 'state.db';

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;
type Success = Extract<ThreadReply, { ok: true }>;

/**
 * Whether this Node has node:sqlite (22.13 and later without a flag; this service needs 24).
 * Asked before the state thread starts, so that an older Node is named as the cause instead of
 * a thread that stopped.
 */
export function sqliteAvailable(): boolean {
  try {
    return typeof process.getBuiltinModule === 'function' && process.getBuiltinModule('node:sqlite') !== undefined;
  } catch {
    return false;
  }
}

/**
 * The embedded store (node:sqlite, in a thread of its own): the default backend, one file in
 * DATA_DIR. docs/architecture.md says why SQLite, and why Node's own binding.
 */
export class SqliteStateStore implements StateStore {
  readonly backend = 'sqlite';
  readonly location: string;
  private worker: Worker | null = null;
  private readonly pending = new Map<number, { resolve: (r: Success) => void; reject: (e: Error) => void }>();
  private nextId = 0;
  private closed: Promise<void> | null = null;
  /** Why the thread stopped, once it has: later requests fail at once instead of waiting. */
  private stopped: Error | null = null;

  /** `sqliteAvailable` stands in for this Node's answer in a test of an older Node. */
  constructor(
    dataDir: string,
    private readonly options: { sqliteAvailable?: () => boolean } = {},
  ) {
    this.location = path.join(path.resolve(dataDir), STATE_FILE_NAME);
  }

  /** The thread, started at the first request (DATA_DIR has been prepared by then). */
  private thread(): Worker {
    if (this.worker) return this.worker;
    if (!(this.options.sqliteAvailable ?? sqliteAvailable)()) {
      throw new StateOpenError({ kind: 'runtime', detail: `this Node (${process.version}) has no node:sqlite, which the SQLite state needs` });
    }
    const worker = new Worker(new URL('./sqlite-state-thread.js', import.meta.url), { workerData: { file: this.location } });
    worker.on('message', (reply: ThreadReply) => {
      const waiter = this.pending.get(reply.id);
      if (!waiter) return;
      this.pending.delete(reply.id);
      if (reply.ok) waiter.resolve(reply);
      else waiter.reject(reply.failure ? new StateOpenError(reply.failure) : new StateStoreError(reply.error));
    });
    const failAll = (error: Error): void => {
      const missing = (error as NodeJS.ErrnoException).code === 'ERR_UNKNOWN_BUILTIN_MODULE';
      this.stopped ??= missing
        ? new StateOpenError({ kind: 'runtime', detail: `this Node (${process.version}) has no node:sqlite, which the SQLite state needs` })
        : new StateStoreError(`the state thread stopped: ${errorMessage(error)}`);
      for (const w of this.pending.values()) w.reject(this.stopped);
      this.pending.clear();
    };
    worker.on('error', failAll);
    worker.on('exit', (code) => failAll(new Error(`exit code ${code}`)));
    this.worker = worker;
    return worker;
  }

  private ask(request: DistributiveOmit<ThreadRequest, 'id'>): Promise<Success> {
    const id = ++this.nextId;
    return new Promise<Success>((resolve, reject) => {
      if (this.stopped) throw this.stopped;
      const worker = this.thread();
      this.pending.set(id, { resolve, reject });
      worker.postMessage({ ...request, id } as ThreadRequest);
    });
  }

  async open(): Promise<StoredState> {
    const opened = (await this.ask({ type: 'open' })).opened as OpenedRows;
    const state = emptyStoredState();
    for (const r of opened.records) state.records[r.ns as RecordNamespace].set(r.key, r.value);
    for (const r of opened.rings) state.rings[r.ns as RingNamespace].push({ seq: r.seq, value: r.value });
    state.movedAside = opened.movedAside;
    state.migrated = opened.migrated;
    state.warnings.push(...opened.warnings);
    return state;
  }

  /** One slice per request: each arrives, and is handled, as a task of its own. */
  async readSessions(onSlice: (rows: SessionRows) => void): Promise<number> {
    let from = 0;
    for (;;) {
      const slice = (await this.ask({ type: 'sessions', from })).sessions as { keys: string[]; values: string[]; more: boolean };
      if (slice.keys.length > 0) onSlice({ keys: slice.keys, values: slice.values });
      from += slice.keys.length;
      if (!slice.more) return from;
    }
  }

  async write(batch: StateBatch): Promise<void> {
    await this.ask({ type: 'write', batch });
  }

  close(): Promise<void> {
    this.closed ??= (async () => {
      const worker = this.worker;
      if (!worker) return;
      try {
        if (!this.stopped) await this.ask({ type: 'close' });
      } finally {
        await worker.terminate();
      }
    })();
    return this.closed;
  }
}
