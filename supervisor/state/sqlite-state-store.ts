import fs from 'node:fs';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import type { LoadedRows, ThreadReply, ThreadRequest } from './sqlite-state-thread.js';
import {
  emptyStoredState,
  StateStoreError,
  type RecordNamespace,
  type RingNamespace,
  type StateBatch,
  type StateStore,
  type StoredState,
} from './state-store.js';

/** The state file inside DATA_DIR. */
export const STATE_FILE_NAME = 'state.db';

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/**
 * The embedded store (node:sqlite, in a thread of its own): the default backend, one file in
 * DATA_DIR. docs/architecture.md says why SQLite, and why Node's own binding.
 */
export class SqliteStateStore implements StateStore {
  readonly location: string;
  private readonly worker: Worker;
  private readonly pending = new Map<number, { resolve: (r: ThreadReply) => void; reject: (e: Error) => void }>();
  private nextId = 0;
  private closed: Promise<void> | null = null;

  constructor(dataDir: string) {
    fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    this.location = path.join(path.resolve(dataDir), STATE_FILE_NAME);
    this.worker = new Worker(new URL('./sqlite-state-thread.js', import.meta.url), { workerData: { file: this.location } });
    this.worker.on('message', (reply: ThreadReply) => {
      const waiter = this.pending.get(reply.id);
      this.pending.delete(reply.id);
      waiter?.resolve(reply);
    });
    const failAll = (error: Error): void => {
      for (const w of this.pending.values()) w.reject(new StateStoreError(`the state thread stopped: ${error.message}`));
      this.pending.clear();
    };
    this.worker.on('error', failAll);
    this.worker.on('exit', (code) => failAll(new Error(`exit code ${code}`)));
  }

  private async ask(request: DistributiveOmit<ThreadRequest, 'id'>): Promise<ThreadReply & { ok: true }> {
    const id = ++this.nextId;
    const reply = await new Promise<ThreadReply>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ ...request, id } as ThreadRequest);
    });
    if (!reply.ok) throw new StateStoreError(reply.error);
    return reply;
  }

  async load(): Promise<StoredState> {
    const loaded = (await this.ask({ type: 'load' })).loaded as LoadedRows;
    const state = emptyStoredState();
    for (const r of loaded.records) state.records[r.ns as RecordNamespace].set(r.key, r.value);
    for (const r of loaded.rings) state.rings[r.ns as RingNamespace].push({ seq: r.seq, value: r.value });
    state.movedAside = loaded.movedAside;
    state.warnings.push(...loaded.warnings);
    return state;
  }

  async write(batch: StateBatch): Promise<void> {
    await this.ask({ type: 'write', batch });
  }

  close(): Promise<void> {
    this.closed ??= (async () => {
      try {
        await this.ask({ type: 'close' });
      } finally {
        await this.worker.terminate();
      }
    })();
    return this.closed;
  }
}
