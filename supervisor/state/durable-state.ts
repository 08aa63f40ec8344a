import type { AuditEvent } from '../../shared/api/audit-event.js';
import type { StatsSample } from '../../shared/api/views.js';
import { errorMessage } from '../../shared/errors/error-message.js';
import type { Logger } from '../../shared/logger.js';
import { AUDIT_CAPACITY, auditClassOf, type AuditLog } from '../audit/audit-log.js';
import type { ExitBan } from '../exits/exit-bans.js';
import type { ExitAssignments, RestoredAssignment } from '../exits/exit-assignments.js';
import type { HealthSnapshot } from '../health/health-snapshot.js';
import type { SessionTable, RestoredSession } from '../sessions/session-table.js';
import { setImmediate as nextTask } from 'node:timers/promises';
import { FINE_SAMPLES, LONG_SAMPLES, type StatsHistory } from '../stats/stats-history.js';
import { banKey, decodeAssignment, decodeBan, encodeAssignment, encodeBan } from './exit-records.js';
import { decodeHealth, encodeHealth } from './health-records.js';
import { decodeAuditEvent, decodeStatsSample, encodeAuditEvent, encodeStatsSample } from './ring-records.js';
import { decodeSession, encodeSession, type StoredExit } from './session-records.js';
import {
  batchIsEmpty,
  emptyBatch,
  SESSION_SLICE_ROWS,
  type RecordNamespace,
  type RingNamespace,
  type SessionRows,
  type StateBatch,
  type StateStore,
  type StoredState,
} from './state-store.js';

/** Changes reach the store at most this long after they happen: what a kill -9 can lose. */
export const STATE_FLUSH_MS = 1000;
/** A store that keeps failing is reported at most this often (the service goes on from memory). */
const WRITE_FAILURE_LOG_MS = 60_000;

const RING_CAPACITY: Record<RingNamespace, number> = {
  'audit-session': AUDIT_CAPACITY,
  'audit-operator': AUDIT_CAPACITY,
  'stats-fine': FINE_SAMPLES,
  'stats-long': LONG_SAMPLES,
};

/** The parts of the supervisor whose state outlives a restart. */
export interface DurableParts {
  sessions: SessionTable;
  /** The exit an instance leaves through now (written with each of its sessions). */
  exitOf(instance: number): StoredExit;
  exits: ExitAssignments | undefined;
  /** Each instance's health, by id. */
  health(): Map<number, HealthSnapshot>;
  audit: AuditLog;
  stats: StatsHistory;
}

/** What `open()` read, checked: everything but the sessions, ready to hand to the parts before the first tor starts. */
export interface EarlyState {
  assignments: Map<number, RestoredAssignment>;
  bans: ExitBan[];
  /** Each instance's health, by id: taken by the pool as it creates each instance (InstanceHealth.restore). */
  health: Map<number, HealthSnapshot>;
  audit: AuditEvent[];
  stats: { fine: StatsSample[]; long: StatsSample[] };
  /** Records that failed their checks and were left out, by namespace. */
  skipped: Partial<Record<RecordNamespace | RingNamespace, number>>;
}

/** The sessions, read and checked after the rest; ready for DurableState.restoreSessions. */
export interface StoredSessions {
  /** Oldest seen first, at most the limit they were read with (the newest of them). */
  sessions: RestoredSession[];
  /** Keys of sessions beyond the limit (MAX_SESSIONS was lowered): deleted with the first write. */
  dropped: string[];
  /** Records that failed their checks and were left out. */
  skipped: number;
}

function decodeAll<T>(entries: Iterable<[string, string]>, decode: (key: string, value: string) => T, onSkip: () => void): T[] {
  const out: T[] = [];
  for (const [key, value] of entries) {
    try {
      out.push(decode(key, value));
    } catch {
      onSkip();
    }
  }
  return out;
}

/** Checks every stored record but the sessions; one that fails is skipped and counted, never half-applied. */
export function checkEarlyState(stored: StoredState): EarlyState {
  const skipped: EarlyState['skipped'] = {};
  const skip = (ns: RecordNamespace | RingNamespace) => () => {
    skipped[ns] = (skipped[ns] ?? 0) + 1;
  };
  const r = stored.records;
  const ring = (ns: RingNamespace) => stored.rings[ns].map((x): [string, string] => [String(x.seq), x.value]);
  return {
    assignments: new Map(decodeAll(r['exit-assignments'], decodeAssignment, skip('exit-assignments')).map((a) => [a.instance, a.assignment])),
    bans: decodeAll(r['exit-bans'], decodeBan, skip('exit-bans')),
    health: new Map(decodeAll(r.health, decodeHealth, skip('health')).map((h) => [h.instance, h.snapshot])),
    audit: [
      ...decodeAll(ring('audit-session'), (k, v) => decodeAuditEvent(Number(k), v), skip('audit-session')),
      ...decodeAll(ring('audit-operator'), (k, v) => decodeAuditEvent(Number(k), v), skip('audit-operator')),
    ],
    stats: {
      fine: decodeAll(ring('stats-fine'), (_k, v) => decodeStatsSample(v), skip('stats-fine')),
      long: decodeAll(ring('stats-long'), (_k, v) => decodeStatsSample(v), skip('stats-long')),
    },
    skipped,
  };
}

/**
 * Checks session records as they arrive, one slice at a time (each slice is its own task of the
 * event loop), then keeps the newest `limit` in last-seen order. A record that fails its checks
 * is skipped and counted.
 */
export class SessionChecker {
  private readonly sessions: RestoredSession[] = [];
  private skipped = 0;

  add(rows: SessionRows): void {
    rows.keys.forEach((key, i) => {
      try {
        this.sessions.push(decodeSession(key, rows.values[i] as string));
      } catch {
        this.skipped++;
      }
    });
  }

  finish(limit: number): StoredSessions {
    // Already in order from a store that sorts (SQLite): the sort then only confirms it.
    const all = this.sessions.sort((a, b) => a.lastSeen - b.lastSeen);
    const keep = Math.max(0, all.length - Math.max(0, limit));
    return { sessions: all.slice(keep), dropped: all.slice(0, keep).map((s) => s.key), skipped: this.skipped };
  }
}

/** Sessions put back into the table per event-loop task: about as long as checking one slice. */
const RESTORE_CHUNK = SESSION_SLICE_ROWS;

/**
 * Appends the samples newer than `after` (their time is their seq); returns the newest time
 * written. Read from the end: a flush finds one new fine sample among FINE_SAMPLES.
 */
function appendSamplesAfter(batch: StateBatch, ring: 'stats-fine' | 'stats-long', series: readonly StatsSample[], after: number): number {
  let first = series.length;
  while (first > 0 && Date.parse((series[first - 1] as StatsSample).time) > after) first--;
  for (const s of series.slice(first)) batch.appends.push({ ring, seq: Date.parse(s.time), value: encodeStatsSample(s) });
  return first < series.length ? Date.parse((series[series.length - 1] as StatsSample).time) : after;
}

/**
 * Writes the supervisor's state behind it: every STATE_FLUSH_MS it collects what changed
 * (sessions by key, the small tables whole when they differ, new audit events and stats samples)
 * into one batch for the store, one write at a time. Nothing on a request path waits for it: the
 * parts change in memory, and this reads them on its own timer.
 */
export class DurableState {
  private timer: NodeJS.Timeout | null = null;
  private writing: Promise<void> | null = null;
  private readonly auditQueue: AuditEvent[] = [];
  private lastAssignments = '';
  private lastBans = '';
  private lastHealth = '';
  private lastFine = 0;
  private lastLong = 0;
  private lastFailureLog = 0;
  private parts: DurableParts | null = null;
  private readonly onAudit = (e: AuditEvent): void => {
    this.auditQueue.push(e);
    // Beyond both rings' worth the oldest could never survive a trim anyway.
    if (this.auditQueue.length > 2 * AUDIT_CAPACITY) this.auditQueue.splice(0, this.auditQueue.length - 2 * AUDIT_CAPACITY);
  };
  /** Batches written, how long the last took, and the event loop's time spent collecting (the write-load benchmark reads them). */
  readonly counters = { batches: 0, records: 0, failures: 0, lastWriteMs: 0, collectMs: 0 };

  constructor(
    private readonly store: StateStore,
    private readonly log: Logger,
  ) {}

  /**
   * Puts what `open()` restored into the parts (audit, stats, exit assignments and bans), says
   * so in the log, and starts writing. Health snapshots are the caller's to apply as instances
   * are created (EarlyState.health). The sessions follow with restoreSessions(), once read.
   */
  static resume(store: StateStore, early: EarlyState, parts: DurableParts, options: { poolSize: number }, log: Logger): DurableState {
    // An instance the pool will not start (it was resized down) reserves no exit.
    for (const id of [...early.assignments.keys()]) if (id >= options.poolSize) early.assignments.delete(id);
    parts.audit.restore(early.audit);
    parts.stats.restore(early.stats.fine, early.stats.long);
    parts.exits?.restore(early.assignments, early.bans);
    log.info('durable state restored (sessions follow)', {
      store: store.location,
      exits: early.assignments.size,
      bans: early.bans.length,
      health: early.health.size,
      audit: early.audit.length,
    });
    const durable = new DurableState(store, log.child({ component: 'state' }));
    durable.start(parts);
    return durable;
  }

  /**
   * Puts the sessions back into the table, oldest seen first, RESTORE_CHUNK at a time with the
   * event loop free between chunks; `holdSessionsOn` gets the instances they were on (they wait
   * for them: Pool.holdRestoredSessions). Before the proxies route anything: a key routed first
   * keeps its new session and the stored one is dropped. Returns how many were restored.
   */
  async restoreSessions(stored: StoredSessions, holdSessionsOn: (instances: number[]) => void): Promise<number> {
    const parts = this.parts;
    if (!parts) throw new Error('restoreSessions before resume');
    let restored = 0;
    for (let from = 0; from < stored.sessions.length; from += RESTORE_CHUNK) {
      if (from > 0) await nextTask();
      restored += parts.sessions.restore(stored.sessions.slice(from, from + RESTORE_CHUNK));
    }
    holdSessionsOn([...new Set(stored.sessions.map((s) => s.instance))]);
    // Sessions the table did not take back (beyond MAX_SESSIONS, after it was lowered) go with
    // the first write: read and dropped at every start, they would keep the file at its peak.
    for (const key of stored.dropped) if (!parts.sessions.get(key)) parts.sessions.markChanged(key);
    for (const s of stored.sessions) if (!parts.sessions.get(s.key)) parts.sessions.markChanged(s.key);
    this.log.info('durable state: sessions restored', { store: this.store.location, sessions: restored, dropped: stored.dropped.length });
    return restored;
  }

  /** Starts tracking and writing; what was restored counts as written. */
  start(parts: DurableParts): void {
    this.parts = parts;
    parts.sessions.trackChanges();
    parts.audit.on('event', this.onAudit);
    const fine = parts.stats.series('fine');
    const long = parts.stats.series('long');
    this.lastFine = fine.length > 0 ? Date.parse((fine[fine.length - 1] as StatsSample).time) : 0;
    this.lastLong = long.length > 0 ? Date.parse((long[long.length - 1] as StatsSample).time) : 0;
    this.timer = setInterval(() => void this.flush(), STATE_FLUSH_MS);
  }

  private collect(parts: DurableParts): { batch: StateBatch; sessionKeys: string[]; audit: AuditEvent[]; fine: number; long: number } {
    const batch = emptyBatch(RING_CAPACITY);
    const sessionKeys = parts.sessions.takeChanged();
    for (const key of sessionKeys) {
      const s = parts.sessions.get(key);
      if (s) batch.puts.push({ ns: 'sessions', key, value: encodeSession(s, parts.exitOf(s.instance)), lastSeen: s.lastSeen });
      else batch.deletes.push({ ns: 'sessions', key });
    }
    if (parts.exits) {
      const assignments = [...parts.exits.assignmentsToStore()].sort(([a], [b]) => a - b).map(([id, a]) => ({ ns: 'exit-assignments' as const, key: String(id), value: encodeAssignment(a) }));
      const text = JSON.stringify(assignments);
      if (text !== this.lastAssignments) {
        batch.replace.push('exit-assignments');
        batch.puts.push(...assignments);
        this.lastAssignments = text;
      }
      const bans = parts.exits.bans.list(Date.now()).map((b) => ({ ns: 'exit-bans' as const, key: banKey(b), value: encodeBan(b) }));
      const bansText = JSON.stringify(bans);
      if (bansText !== this.lastBans) {
        batch.replace.push('exit-bans');
        batch.puts.push(...bans);
        this.lastBans = bansText;
      }
    }
    const health = [...parts.health()].sort(([a], [b]) => a - b).map(([id, h]) => ({ ns: 'health' as const, key: String(id), value: encodeHealth(h) }));
    const healthText = JSON.stringify(health);
    if (healthText !== this.lastHealth) {
      batch.replace.push('health');
      batch.puts.push(...health);
      this.lastHealth = healthText;
    }
    const audit = this.auditQueue.splice(0);
    for (const e of audit) batch.appends.push({ ring: auditClassOf(e.type, e.session) === 'session' ? 'audit-session' : 'audit-operator', seq: e.id, value: encodeAuditEvent(e) });
    const fine = appendSamplesAfter(batch, 'stats-fine', parts.stats.series('fine'), this.lastFine);
    const long = appendSamplesAfter(batch, 'stats-long', parts.stats.series('long'), this.lastLong);
    return { batch, sessionKeys, audit, fine, long };
  }

  /** Writes what changed since the last flush; a flush already under way is waited for, not doubled. */
  flush(): Promise<void> {
    if (this.writing) return this.writing;
    const parts = this.parts;
    if (!parts) return Promise.resolve();
    const collecting = performance.now();
    const { batch, sessionKeys, audit, fine, long } = this.collect(parts);
    this.counters.collectMs += performance.now() - collecting;
    if (batchIsEmpty(batch)) return Promise.resolve();
    const started = Date.now();
    this.writing = this.store
      .write(batch)
      .then(() => {
        this.lastFine = fine;
        this.lastLong = long;
        this.counters.batches += 1;
        this.counters.records += batch.puts.length + batch.deletes.length + batch.appends.length;
        this.counters.lastWriteMs = Date.now() - started;
      })
      .catch((error: unknown) => {
        // Nothing is lost from memory: the changes go again with the next batch.
        this.counters.failures += 1;
        for (const key of sessionKeys) parts.sessions.markChanged(key);
        this.auditQueue.unshift(...audit);
        this.lastAssignments = this.lastBans = this.lastHealth = '';
        const now = Date.now();
        if (now - this.lastFailureLog >= WRITE_FAILURE_LOG_MS) {
          this.lastFailureLog = now;
          this.log.error('writing the durable state failed; serving from memory and retrying every flush', { store: this.store.location, error: errorMessage(error) });
        }
      })
      .finally(() => {
        this.writing = null;
      });
    return this.writing;
  }

  /** A last flush (waiting for one under way first), then the store closes. */
  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.writing;
    await this.flush();
    this.parts?.audit.off('event', this.onAudit);
    await this.store.close();
  }
}
