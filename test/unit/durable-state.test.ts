import { expect } from 'chai';
import fc from 'fast-check';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import '../support/fixtures/fuzz-runs.js';
import { loadConfig } from '../../shared/config/index.js';
import { logger } from '../../shared/logger.js';
import { AuditLog } from '../../supervisor/audit/audit-log.js';
import { ExitAssignments } from '../../supervisor/exits/exit-assignments.js';
import { addressBlock, asPublished, type ExitRelay } from '../../supervisor/exits/exit-relay.js';
import { restoreHealth, snapshotHealth } from '../../supervisor/health/health-snapshot.js';
import { initialHealthState, reduceHealth, type HealthMachineState } from '../../supervisor/health/health-machine.js';
import { SessionTable } from '../../supervisor/sessions/session-table.js';
import { StatsHistory } from '../../supervisor/stats/stats-history.js';
import { checkEarlyState, DurableState, SessionChecker } from '../../supervisor/state/durable-state.js';
import { loadStoredSessions, openDurableState } from '../../supervisor/state/load-durable-state.js';
import { decodeAssignment, decodeBan, encodeAssignment, encodeBan } from '../../supervisor/state/exit-records.js';
import { decodeHealth, encodeHealth } from '../../supervisor/state/health-records.js';
import { decodeAuditEvent, decodeStatsSample } from '../../supervisor/state/ring-records.js';
import { decodeSession, encodeSession } from '../../supervisor/state/session-records.js';
import { SqliteStateStore, STATE_FILE_NAME } from '../../supervisor/state/sqlite-state-store.js';
import { STATE_FORMAT_VERSION } from '../../supervisor/state/sqlite-state-file.js';
import { VACUUM_FREE_PAGES } from '../../supervisor/state/sqlite-state-thread.js';
import { WAL_AUTOCHECKPOINT_PAGES, WAL_SIZE_LIMIT_BYTES } from '../../supervisor/state/sqlite-state-file.js';
import { emptyBatch, emptyStoredState, readWholeState, SESSION_SLICE_ROWS, type SessionRows, type StateBatch, type StateStore, type StoredState } from '../../supervisor/state/state-store.js';
import { InvalidStoredRecord } from '../../supervisor/state/stored-value.js';
import { expectStoreRoundTrip } from '../support/state/store-contract.js';
import { STATE_V1_DIR } from '../support/state/state-fixture.js';
import { StartupError } from '../../supervisor/startup/startup-error.js';

const CAP = { 'audit-session': 3, 'audit-operator': 3, 'stats-fine': 900, 'stats-long': 1440 };
const fp = (c: string): string => c.repeat(40).toUpperCase();

function relay(c: string, address: string): ExitRelay {
  return asPublished({ fingerprint: fp(c), nickname: `n${c}`, address, country: 'de', bandwidth: 1000, block: addressBlock(address), family: fp(c) });
}

function tempDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-state-unit-'));
}

describe('durable state: the SQLite store', () => {
  const dirs: string[] = [];
  after(() => {
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });
  const dir = (): string => {
    const d = tempDir();
    dirs.push(d);
    return d;
  };

  it('writes batches atomically and reads them back: upserts, deletes, whole namespaces, rings trimmed by count', async () => {
    const d = dir();
    await expectStoreRoundTrip(() => new SqliteStateStore(d));
  });

  it('a batch that fails is rolled back whole', async () => {
    const d = dir();
    const store = new SqliteStateStore(d);
    await store.open();
    const bad = emptyBatch(CAP);
    bad.puts.push({ ns: 'sessions', key: 'a', value: '1' });
    // A NULL value violates the schema: the put before it must not stay.
    bad.puts.push({ ns: 'sessions', key: 'b', value: null as unknown as string });
    let failed = false;
    await store.write(bad).catch(() => (failed = true));
    expect(failed).to.equal(true);
    expect(await store.readSessions(() => undefined), 'the put before the failing one was rolled back').to.equal(0);
    await store.close();
  });

  it('hands the sessions over in slices of at most SESSION_SLICE_ROWS, oldest seen first, whatever order they were written in', async () => {
    const d = dir();
    const store = new SqliteStateStore(d);
    await store.open();
    const n = 2 * SESSION_SLICE_ROWS + 7;
    const b = emptyBatch(CAP);
    // Written newest first, and updated once: the order is by last seen, not by insertion.
    for (let i = n - 1; i >= 0; i--) b.puts.push({ ns: 'sessions', key: `s${i}`, value: `v${i}`, lastSeen: 1000 + i });
    b.puts.push({ ns: 'sessions', key: 's0', value: 'v0 seen last', lastSeen: 10_000_000 });
    await store.write(b);
    const slices: SessionRows[] = [];
    expect(await store.readSessions((rows) => slices.push(rows))).to.equal(n);
    expect(slices.map((x) => x.keys.length)).to.deep.equal([SESSION_SLICE_ROWS, SESSION_SLICE_ROWS, 7]);
    const keys = slices.flatMap((x) => x.keys);
    expect(keys.slice(0, 3)).to.deep.equal(['s1', 's2', 's3']);
    expect(keys[keys.length - 1]).to.equal('s0');
    expect(slices[slices.length - 1]?.values.at(-1)).to.equal('v0 seen last');
    await store.close();
  });

  it('on a Node without node:sqlite, refuses the start naming that Node and what to run instead (not DATA_DIR or Redis)', async () => {
    const d = dir();
    const store = new SqliteStateStore(d, { sqliteAvailable: () => false });
    let error: unknown;
    await openDurableState(store, logger()).catch((e: unknown) => (error = e));
    expect(error).to.be.instanceOf(StartupError);
    expect((error as StartupError).setting).to.equal('STATE_STORE');
    const message = (error as Error).message;
    expect(message).to.include(`this Node (${process.version}) has no node:sqlite`);
    expect(message).to.match(/Node 24 or later.*node_modules\/\.bin.*STATE_STORE=none/);
    expect(message).to.not.match(/permission|Redis/);
    expect(fs.readdirSync(d), 'nothing created').to.deep.equal([]);
  });

  for (const [name, spoil] of [
    ['garbage', (file: string) => fs.writeFileSync(file, Buffer.alloc(8192, 0x5a))],
    [
      'a state file cut short (its second half lost)',
      (file: string) => {
        fs.copyFileSync(path.join(STATE_V1_DIR, STATE_FILE_NAME), file);
        fs.truncateSync(file, fs.statSync(file).size / 2);
      },
    ],
    [
      'a state file whose meta names no version',
      (file: string) => {
        fs.copyFileSync(path.join(STATE_V1_DIR, STATE_FILE_NAME), file);
        const db = new DatabaseSync(file);
        db.exec("UPDATE meta SET value = 'one' WHERE key = 'version'");
        db.close();
      },
    ],
  ] as const) {
    it(`moves ${name} aside (proven corrupt), keeps it as it was, and starts empty`, async () => {
      const d = dir();
      const file = path.join(d, STATE_FILE_NAME);
      spoil(file);
      const before = fs.readFileSync(file);
      const store = new SqliteStateStore(d);
      const s = await readWholeState(store);
      expect(s.movedAside?.path).to.match(/state\.db\.unusable-/);
      expect(fs.readFileSync(s.movedAside?.path as string).equals(before), 'the file is kept as it was').to.equal(true);
      expect(s.records.sessions.size).to.equal(0);
      const b = emptyBatch(CAP);
      b.puts.push({ ns: 'sessions', key: 'k', value: 'v' });
      await store.write(b);
      await store.close();
      expect(fs.statSync(file).mode & 0o777, 'the new file is private').to.equal(0o600);
    });
  }
});

describe('durable state: the SQLite files stay bounded', () => {
  const dirs: string[] = [];
  after(() => {
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });
  /** SQLite's default page size, which the store does not change. */
  const PAGE_BYTES = 4096;
  /** Far more than MAX_SESSIONS below: what a burst, or a larger MAX_SESSIONS before a restart, left. */
  const PEAK_SESSIONS = 20_000;
  const MAX_SESSIONS = 50;
  /** New sessions between two flushes, as STATE_FLUSH_MS collects them under load. */
  const CHURN_BATCH = 200;
  /** What 50 sessions, the rings' few rows and SQLite's own pages take, with room to spare. */
  const LIVE_BYTES = 512 * 1024;
  /** What one flush of CHURN_BATCH new sessions (and as many evicted) adds to the WAL, with room to spare. */
  const BATCH_BYTES = 256 * 1024;
  /** The live rows, plus at most VACUUM_FREE_PAGES free pages. */
  const DB_BOUND_BYTES = LIVE_BYTES + VACUUM_FREE_PAGES * PAGE_BYTES;
  /** At most WAL_AUTOCHECKPOINT_PAGES (or what WAL_SIZE_LIMIT_BYTES cuts it to), plus the batch that crossed it. */
  const WAL_BOUND_BYTES = Math.max(WAL_AUTOCHECKPOINT_PAGES * PAGE_BYTES, WAL_SIZE_LIMIT_BYTES) + BATCH_BYTES;

  const sizeOf = (file: string): number => (fs.existsSync(file) ? fs.statSync(file).size : 0);
  const storedSession = (key: string, lastSeen: number): string =>
    encodeSession({ key, id: 1, instance: lastSeen % 4, createdAt: lastSeen, lastSeen, requests: 3, failures: 0, bytesUp: 100, bytesDown: 2000, active: 0, recentExits: ['127.20.0.1'], domains: ['shop.example'] }, { ip: '127.21.0.1', fingerprint: fp('a') });

  it(`after ${PEAK_SESSIONS} stored sessions, a restart with MAX_SESSIONS=${MAX_SESSIONS} and ${PEAK_SESSIONS} more churned through, the database and its WAL stay under the bound`, async () => {
    const d = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-state-bound-'));
    dirs.push(d);
    const file = path.join(d, STATE_FILE_NAME);
    const first = new SqliteStateStore(d);
    await first.open();
    const peak = emptyBatch(CAP);
    for (let i = 0; i < PEAK_SESSIONS; i++) peak.puts.push({ ns: 'sessions', key: `peak-${i}`, value: storedSession(`peak-${i}`, 1_000 + i), lastSeen: 1_000 + i });
    await first.write(peak);
    await first.close();
    const peakBytes = sizeOf(file);
    expect(peakBytes, 'the peak is well above the bounds (else the test shows nothing)').to.be.above(2 * (DB_BOUND_BYTES + WAL_BOUND_BYTES));

    const store = new SqliteStateStore(d);
    const early = await openDurableState(store, logger());
    const stored = await loadStoredSessions(store, logger(), MAX_SESSIONS);
    expect([stored.sessions.length, stored.dropped.length], 'the newest MAX_SESSIONS kept, the rest dropped').to.deep.equal([MAX_SESSIONS, PEAK_SESSIONS - MAX_SESSIONS]);
    expect(stored.sessions.map((x) => x.key).slice(-2)).to.deep.equal([`peak-${PEAK_SESSIONS - 2}`, `peak-${PEAK_SESSIONS - 1}`]);
    const sessions = new SessionTable({ maxSessions: MAX_SESSIONS, ttlMs: 3_600_000 });
    const parts = { sessions, exitOf: () => ({ ip: '127.21.0.1', fingerprint: fp('a') }), exits: undefined, health: () => new Map(), audit: new AuditLog(), stats: new StatsHistory() };
    const durable = DurableState.resume(store, early, parts, { poolSize: 4 }, logger());
    expect(await durable.restoreSessions(stored, () => undefined)).to.equal(MAX_SESSIONS);
    let largest = { db: 0, wal: 0 };
    try {
      for (let i = 0; i < PEAK_SESSIONS; i++) {
        const key = `churn-${i}`;
        const r = sessions.route(key, { routable: [0, 1, 2, 3], lastResort: null }, 10_000_000 + i);
        if (!r.ok) throw new Error(`${key} not routed: ${r.reason}`);
        sessions.forgetConnections(key, r.session.id, 1);
        if (i % CHURN_BATCH === CHURN_BATCH - 1) {
          await durable.flush();
          largest = { db: Math.max(largest.db, sizeOf(file)), wal: Math.max(largest.wal, sizeOf(`${file}-wal`)) };
        }
      }
    } finally {
      await durable.close();
    }
    // Measured after every flush: the first deletes what MAX_SESSIONS dropped at the restart.
    expect(largest.db, `the database while running, at most (the peak left ${peakBytes})`).to.be.at.most(DB_BOUND_BYTES);
    expect(largest.wal, 'the WAL while running, at most').to.be.at.most(WAL_BOUND_BYTES);
    expect(sizeOf(file), 'the database once closed').to.be.at.most(DB_BOUND_BYTES);
    const reread = new SqliteStateStore(d);
    expect((await readWholeState(reread)).records.sessions.size, 'what the table holds, no more').to.equal(MAX_SESSIONS);
    await reread.close();
  });

  it('converts a state file written before incremental vacuum, keeping what it holds', async () => {
    const d = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-state-convert-'));
    dirs.push(d);
    const file = path.join(d, STATE_FILE_NAME);
    // As the first release wrote it: no auto-vacuum, format version 1.
    const old = new DatabaseSync(file);
    old.exec(`
      PRAGMA journal_mode=WAL;
      CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
      CREATE TABLE records (ns TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (ns, key)) WITHOUT ROWID;
      CREATE TABLE rings (ns TEXT NOT NULL, seq INTEGER NOT NULL, value TEXT NOT NULL, PRIMARY KEY (ns, seq)) WITHOUT ROWID;
      INSERT INTO meta VALUES ('format', 'exitpool-state'), ('version', '1');
    `);
    old.prepare('INSERT INTO records VALUES (?, ?, ?)').run('sessions', 'kept', storedSession('kept', 5));
    expect((old.prepare('PRAGMA auto_vacuum').get() as { auto_vacuum: number }).auto_vacuum).to.equal(0);
    old.close();

    const store = new SqliteStateStore(d);
    const loaded = await readWholeState(store);
    expect(loaded.movedAside, 'an older file is ours: converted, not moved aside').to.equal(null);
    expect(loaded.migrated, 'and migrated').to.deep.equal({ from: 1, to: STATE_FORMAT_VERSION });
    expect(loaded.warnings).to.deep.equal([]);
    expect(loaded.records.sessions.get('kept')).to.equal(storedSession('kept', 5));
    await store.close();
    const check = new DatabaseSync(file);
    try {
      expect((check.prepare('PRAGMA auto_vacuum').get() as { auto_vacuum: number }).auto_vacuum, 'incremental').to.equal(2);
    } finally {
      check.close();
    }
  });
});

describe('durable state: stored records are checked field by field', () => {
  it('round-trips a session, an assignment, a ban and a health snapshot', () => {
    const table = new SessionTable({ maxSessions: 10, ttlMs: 60_000 });
    const routed = table.route('user-1', { routable: [2], lastResort: null }, 1_000);
    if (!routed.ok) throw new Error('not routed');
    routed.session.recentExits = ['127.20.0.1'];
    routed.session.domains = ['shop.example'];
    const text = encodeSession(routed.session, { ip: '127.21.0.1', fingerprint: fp('a') });
    const back = decodeSession('user-1', text);
    expect(back).to.deep.include({ key: 'user-1', instance: 2, createdAt: 1_000, lastSeen: 1_000, recentExits: ['127.20.0.1'], domains: ['shop.example'] });
    expect(JSON.parse(text).exit, 'the exit is written for whoever reads the state').to.deep.equal({ ip: '127.21.0.1', fingerprint: fp('a') });

    expect(decodeAssignment('3', encodeAssignment({ fingerprint: fp('b'), nickname: 'nb', address: '10.0.0.2' })).assignment.fingerprint).to.equal(fp('b'));
    const ban = { fingerprint: fp('c'), address: '10.0.0.3', nickname: 'nc', domain: '', cause: 'captcha' as const, reason: 'x', since: 1, until: 2 };
    expect(decodeBan(`${fp('c')}|`, encodeBan(ban))).to.deep.equal(ban);
    // Every other address the exit was seen leaving from is kept with the ban (issue 31).
    const seen = { ...ban, seen: ['10.9.0.1', '2001:db8::1'] };
    expect(decodeBan(`${fp('c')}|`, encodeBan(seen))).to.deep.equal(seen);
    const config = loadConfig({});
    const h = snapshotHealth(initialHealthState(config), null);
    expect(decodeHealth('0', encodeHealth(h)).snapshot).to.deep.equal(h);
  });

  it('refuses records whose key, types or bounds are wrong', () => {
    const good = JSON.parse(encodeSession({ key: 'k', id: 1, instance: 0, createdAt: 1, lastSeen: 2, requests: 0, failures: 0, bytesUp: 0, bytesDown: 0, active: 0, recentExits: [], domains: [] }, { ip: '', fingerprint: '' })) as Record<string, unknown>;
    const cases: [string, Record<string, unknown>][] = [
      ['another key', { ...good, key: 'other' }],
      ['instance out of range', { ...good, instance: 64 }],
      ['negative counter', { ...good, requests: -1 }],
      ['fractional counter', { ...good, bytes_up: 1.5 }],
      ['seen before created', { ...good, last_seen: 0 }],
      ['a huge exit list', { ...good, recent_exits: Array.from({ length: 1000 }, () => '1.2.3.4') }],
      ['a time past year 9999', { ...good, created_at: 1e15, last_seen: 1e15 }],
      ['no exit', { ...good, exit: undefined }],
    ];
    for (const [name, record] of cases) expect(() => decodeSession('k', JSON.stringify(record)), name).to.throw(InvalidStoredRecord);
    expect(() => decodeAssignment('64', encodeAssignment({ fingerprint: fp('a'), nickname: 'n', address: 'x' }))).to.throw(InvalidStoredRecord);
    expect(() => decodeAssignment('01', encodeAssignment({ fingerprint: fp('a'), nickname: 'n', address: 'x' }))).to.throw(InvalidStoredRecord);
    expect(() => decodeAssignment('1', encodeAssignment({ fingerprint: 'a'.repeat(40), nickname: 'n', address: 'x' })), 'lower-case fingerprint').to.throw(InvalidStoredRecord);
    expect(() => decodeAuditEvent(2, JSON.stringify({ id: 1, time: '2026-01-01T00:00:00.000Z', type: 'rotate', instance: null, session: null, message: '', details: {} }))).to.throw(InvalidStoredRecord);
    expect(() => decodeAuditEvent(1, JSON.stringify({ id: 1, time: 'yesterday', type: 'rotate', instance: null, session: null, message: '', details: {} }))).to.throw(InvalidStoredRecord);
    expect(() => decodeStatsSample('{"time":"2026-01-01T00:00:00Z"}')).to.throw(InvalidStoredRecord);
    const ban = JSON.parse(encodeBan({ fingerprint: fp('a'), address: '10.0.0.1', nickname: 'n', domain: '', cause: 'captcha', reason: 'x', since: 1, until: 2 })) as Record<string, unknown>;
    for (const [name, seen] of [
      ['seen addresses that are not a list', '10.0.0.2'],
      ['too many seen addresses', Array.from({ length: 100 }, (_, i) => `10.0.0.${i}`)],
      ['a seen address that is not text', [42]],
      ['an overlong seen address', ['x'.repeat(1000)]],
    ] as const) {
      expect(() => decodeBan(`${fp('a')}|`, JSON.stringify({ ...ban, seen })), name).to.throw(InvalidStoredRecord);
    }
  });

  it('property: any stored text either decodes to a valid record or fails with InvalidStoredRecord (never another error)', () => {
    const decoders: ((text: string) => unknown)[] = [
      (t) => decodeSession('k', t),
      (t) => decodeAssignment('0', t),
      (t) => decodeBan(`${fp('a')}|`, t),
      (t) => decodeHealth('0', t),
      (t) => decodeAuditEvent(1, t),
      (t) => decodeStatsSample(t),
    ];
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.json(), fc.jsonValue().map((v) => JSON.stringify({ key: 'k', window: v, exit: v, details: v, latency_ms: v }))), fc.nat(decoders.length - 1), (text, i) => {
        try {
          (decoders[i] as (t: string) => unknown)(text);
        } catch (error) {
          expect(error).to.be.instanceOf(InvalidStoredRecord);
        }
      }),
    );
  });

  it('checkEarlyState and SessionChecker keep the good records and count the bad ones by namespace', () => {
    const stored = emptyStoredState();
    stored.records['exit-bans'].set('x', 'not json');
    stored.rings['audit-operator'].push({ seq: 1, value: '{}' });
    expect(checkEarlyState(stored).skipped).to.deep.equal({ 'exit-bans': 1, 'audit-operator': 1 });
    const session = (key: string, lastSeen: number): string =>
      encodeSession({ key, id: 1, instance: 1, createdAt: 1, lastSeen, requests: 0, failures: 0, bytesUp: 0, bytesDown: 0, active: 0, recentExits: [], domains: [] }, { ip: '', fingerprint: '' });
    const checker = new SessionChecker();
    // Slices in any order; one record is not ours (its key is not the record's).
    checker.add({ keys: ['late', 'bad'], values: [session('late', 30), '{"key":"bad"}'] });
    checker.add({ keys: ['early', 'mid'], values: [session('early', 10), session('mid', 20)] });
    const r = checker.finish(2);
    expect(r.sessions.map((x) => x.key), 'the newest 2, oldest first').to.deep.equal(['mid', 'late']);
    expect(r.dropped).to.deep.equal(['early']);
    expect(r.skipped).to.equal(1);
  });
});

describe('durable state: what each part restores', () => {
  const config = loadConfig({ FAILURE_WINDOW: '60s', QUARANTINE_FAILURES: '5', REMEDIATION_BACKOFF_BASE: '30s' });

  function withFailures(s: HealthMachineState, at: number[], successAfter: number): HealthMachineState {
    let state = reduceHealth(s, { type: 'bootstrapped' }, 0, config).state;
    at.forEach((t, i) => {
      state = reduceHealth(state, { type: 'failure', kind: 'other', source: 'client', scored: true, mayQuarantine: false }, t, config).state;
      if (i === successAfter) state = reduceHealth(state, { type: 'success', endedAt: t + 1 }, t + 1, config).state;
    });
    return state;
  }

  it('health: the window resumes with its run, old failures drop out, the ladder keeps its recurrence clock', () => {
    const s = withFailures(initialHealthState(config), [1_000, 2_000, 3_000], 0);
    expect([s.window.size, s.window.consecutive]).to.deep.equal([3, 2]);
    const snap = snapshotHealth({ ...s, ladder: s.ladder }, null);
    const back = restoreHealth(snap, config, 10_000).state;
    expect(back.state, 'a routable instance starts again').to.equal('starting');
    expect([back.window.size, back.window.consecutive, back.window.score]).to.deep.equal([3, 2, s.window.score]);
    const later = restoreHealth(snap, config, 61_500).state;
    expect([later.window.size, later.window.consecutive], 'the first failure left the window meanwhile').to.deep.equal([2, 2]);
  });

  it('health: a rung under way resumes with what was left of its delay; a rung long overdue runs at once', () => {
    let s = reduceHealth(initialHealthState(config), { type: 'bootstrapped' }, 0, config).state;
    s = reduceHealth(s, { type: 'manualQuarantine' }, 0, config).state;
    const snap = snapshotHealth(s, { plan: { rung: 'restart_backoff', attempt: 2, cause: 'recurrence', delayMs: 60_000 }, dueAt: 60_000 });
    const early = restoreHealth(snap, config, 20_000);
    expect(early.state.state).to.equal('quarantined');
    expect(early.state.ladder.active).to.equal(true);
    expect(early.resume).to.deep.equal({ rung: 'restart_backoff', attempt: 2, cause: 'recurrence', delayMs: 40_000 });
    expect(restoreHealth(snap, config, 90_000).resume?.delayMs).to.equal(0);
  });

  it('sessions: restored in last-seen order, newest kept within MAX_SESSIONS, ids fresh, nothing active', () => {
    const table = new SessionTable({ maxSessions: 2, ttlMs: 60_000 });
    const base = { instance: 1, createdAt: 0, requests: 3, failures: 0, bytesUp: 0, bytesDown: 0, recentExits: [], domains: [] };
    const n = table.restore([
      { ...base, key: 'new', lastSeen: 300 },
      { ...base, key: 'old', lastSeen: 100 },
      { ...base, key: 'mid', lastSeen: 200, displaced: { from: 0, burnt: true } },
    ]);
    expect(n).to.equal(2);
    expect([...table.all()].map((s) => s.key)).to.deep.equal(['mid', 'new']);
    expect(table.get('mid')?.active).to.equal(0);
    expect(table.displacedCount).to.equal(1);
    expect(table.expire(200 + 60_000)).to.deep.equal(['mid']);
    table.route('fresh', { routable: [0], lastResort: null }, 1_000);
    expect(table.restore([{ ...base, key: 'late', lastSeen: 500 }]), 'a full table takes none').to.equal(0);
  });

  it('sessions: changes are tracked once asked, and a removed key reads as gone', () => {
    const table = new SessionTable({ maxSessions: 10, ttlMs: 1_000 });
    table.route('before', { routable: [0], lastResort: null }, 0);
    table.trackChanges();
    expect(table.takeChanged()).to.deep.equal([]);
    table.route('a', { routable: [0], lastResort: null }, 0);
    table.route('b', { routable: [0], lastResort: null }, 0);
    expect(table.takeChanged().sort()).to.deep.equal(['a', 'b']);
    table.delete('a');
    expect(table.takeChanged()).to.deep.equal(['a']);
  });

  it('exits: each instance gets its exit back, nobody else takes it meanwhile, and one that left is audited', () => {
    const audit = new AuditLog();
    const a = new ExitAssignments({ unit: 'subnet', banTtlMs: 1000, exitNodes: [], strictNodes: false, audit, log: logger(), now: () => 0, random: () => 0 });
    a.catalog.replace([relay('a', '10.0.0.1'), relay('b', '10.1.0.1'), relay('c', '10.2.0.1')], 1);
    a.restore(
      new Map([
        [0, { fingerprint: fp('b'), nickname: 'nb', address: '10.1.0.1' }],
        [1, { fingerprint: fp('a'), nickname: 'na', address: '10.0.0.1' }],
        [2, { fingerprint: fp('f'), nickname: 'gone', address: '10.9.0.1' }],
      ]),
      [{ fingerprint: fp('c'), address: '10.2.0.1', nickname: 'nc', domain: '', cause: 'captcha', reason: 'r', since: 0, until: 500 }],
    );
    const two = a.next(2, { fresh: false, why: 'bootstrap' });
    // Its exit left and c is banned: a and b are reserved, so it can only share one (a shortage).
    expect(two.ok && !two.distinct && two.relay.fingerprint !== fp('c')).to.equal(true);
    expect(audit.recent(10).some((e) => e.details.reason === 'restored_exit_unavailable' && e.instance === 2)).to.equal(true);
    const zero = a.next(0, { fresh: false, why: 'bootstrap' });
    const one = a.next(1, { fresh: false, why: 'bootstrap' });
    expect([zero.ok && zero.relay.fingerprint, one.ok && one.relay.fingerprint]).to.deep.equal([fp('b'), fp('a')]);
    expect(audit.recent(10).filter((e) => e.details.why === 'restored').length).to.equal(2);
    expect([...a.assignmentsToStore().keys()].sort()).to.deep.equal([0, 1, 2]);
  });

  it('exits: a ban that ended while the service was down is dropped; one still running keeps its own end', () => {
    const downtimeEnd = 10_000;
    const a = new ExitAssignments({ unit: 'subnet', banTtlMs: 1000, exitNodes: [], strictNodes: false, audit: new AuditLog(), log: logger(), now: () => downtimeEnd, random: () => 0 });
    a.catalog.replace([relay('a', '10.0.0.1'), relay('b', '10.1.0.1')], 1);
    const ban = (c: string, address: string, until: number) => ({ fingerprint: fp(c), address, nickname: `n${c}`, domain: '', cause: 'captcha' as const, reason: 'r', since: 0, until });
    a.restore(new Map([[0, { fingerprint: fp('a'), nickname: 'na', address: '10.0.0.1' }]]), [ban('a', '10.0.0.1', downtimeEnd - 1), ban('b', '10.1.0.1', downtimeEnd + 5_000)]);
    expect(a.bans.size, 'only the ban still in force is kept').to.equal(1);
    expect(a.bans.list(downtimeEnd).map((b) => [b.fingerprint, b.until])).to.deep.equal([[fp('b'), downtimeEnd + 5_000]]);
    const zero = a.next(0, { fresh: false, why: 'bootstrap' });
    expect(zero.ok && zero.relay.fingerprint, 'its exit, no longer banned, is pinned again').to.equal(fp('a'));
  });

  it('audit and stats: ids go on from the highest kept, each class keeps its ring, samples come back in order', () => {
    const audit = new AuditLog(2);
    audit.restore([
      { id: 7, time: new Date(0).toISOString(), type: 'rotate', instance: 0, session: 's', message: 'r', details: {} },
      { id: 5, time: new Date(0).toISOString(), type: 'auth', instance: null, session: null, message: 'a', details: {} },
    ]);
    expect(audit.record({ type: 'resize', message: 'x' }).id).to.equal(8);
    expect(audit.recent(10).map((e) => e.id)).to.deep.equal([8, 7, 5]);
    const stats = new StatsHistory();
    const sample = (t: number) => ({ time: new Date(t).toISOString(), interval_secs: 1, requests: t, failures: 0, bytes_up: 0, bytes_down: 0, latency_ms: { p50: 0, p90: 0, p99: 0 }, sessions: 0, routable: 1 });
    stats.restore([sample(1000), sample(2000)], []);
    stats.tick(3000, { sessions: 0, routable: 1 });
    expect(stats.series('fine').map((s) => s.time)).to.deep.equal([1000, 2000, 3000].map((t) => new Date(t).toISOString()));
  });
});

describe('durable state: the writer', () => {
  class MemoryStore implements StateStore {
    readonly backend = 'sqlite';
    readonly location = 'memory';
    batches: StateBatch[] = [];
    failNext = false;
    open(): Promise<StoredState> {
      return Promise.resolve(emptyStoredState());
    }
    readSessions(): Promise<number> {
      return Promise.resolve(0);
    }
    write(batch: StateBatch): Promise<void> {
      if (this.failNext) {
        this.failNext = false;
        return Promise.reject(new Error('disk full'));
      }
      this.batches.push(batch);
      return Promise.resolve();
    }
    close(): Promise<void> {
      return Promise.resolve();
    }
  }

  function parts(): { sessions: SessionTable; audit: AuditLog; stats: StatsHistory; health: Map<number, ReturnType<typeof snapshotHealth>> } {
    return { sessions: new SessionTable({ maxSessions: 10, ttlMs: 60_000 }), audit: new AuditLog(), stats: new StatsHistory(), health: new Map() };
  }

  it('writes only what changed, and after a failed write writes it again with the next', async () => {
    const store = new MemoryStore();
    const p = parts();
    const durable = new DurableState(store, logger());
    durable.start({ sessions: p.sessions, exitOf: () => ({ ip: '10.0.0.1', fingerprint: fp('a') }), exits: undefined, health: () => p.health, audit: p.audit, stats: p.stats });
    p.sessions.route('a', { routable: [0], lastResort: null }, 0);
    p.audit.record({ type: 'resize', message: 'one' });
    store.failNext = true;
    await durable.flush();
    expect(store.batches).to.have.length(0);
    expect(durable.counters.failures).to.equal(1);
    await durable.flush();
    const [first] = store.batches as [StateBatch];
    expect(first.puts.map((x) => x.key)).to.deep.equal(['a']);
    expect(first.appends.map((x) => x.seq)).to.deep.equal([1]);
    await durable.flush();
    expect(store.batches, 'nothing changed: nothing written').to.have.length(1);
    p.sessions.delete('a');
    await durable.close();
    expect((store.batches[1] as StateBatch).deletes).to.deep.equal([{ ns: 'sessions', key: 'a' }]);
  });
});
