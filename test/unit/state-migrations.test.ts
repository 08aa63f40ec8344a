/**
 * The SQLite state file across format versions, from the committed file of version 1
 * (test/fixtures/state-v1/): every migration in order keeps every record; a file that cannot
 * be read, is another program's or is newer is refused and left byte for byte as it was.
 */
import { expect } from 'chai';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { currentVersion, migrateStateFile, MigrationFailed, SQLITE_MIGRATIONS, type SqliteMigration } from '../../supervisor/state/sqlite-migrations.js';
import { openStateFile, STATE_FORMAT_VERSION, StateFileFailure } from '../../supervisor/state/sqlite-state-file.js';
import { SqliteStateStore, STATE_FILE_NAME } from '../../supervisor/state/sqlite-state-store.js';
import { readWholeState, StateOpenError, type StateOpenFailure, type StoredState } from '../../supervisor/state/state-store.js';
import { copyV1StateFile, fixtureRecords, STATE_V1_DIR, type FixtureRecords } from '../support/state/state-fixture.js';

function tempDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-migrations-'));
}

/** What a store read, in records.json's shape (keys sorted, empty namespaces left out). */
function asFixture(s: StoredState): Pick<FixtureRecords, 'records' | 'rings'> {
  const records: FixtureRecords['records'] = {};
  for (const [ns, m] of Object.entries(s.records)) if (m.size > 0) records[ns] = Object.fromEntries([...m].sort(([a], [b]) => (a < b ? -1 : 1)));
  const rings: FixtureRecords['rings'] = {};
  for (const [ring, l] of Object.entries(s.rings)) if (l.length > 0) rings[ring] = l;
  return { records, rings };
}

function sortedFixture(): Pick<FixtureRecords, 'records' | 'rings'> {
  const f = fixtureRecords();
  const records = Object.fromEntries(Object.entries(f.records).map(([ns, m]) => [ns, Object.fromEntries(Object.entries(m).sort(([a], [b]) => (a < b ? -1 : 1)))]));
  const rings = Object.fromEntries(Object.entries(f.rings).map(([r, l]) => [r, [...l].sort((a, b) => a.seq - b.seq)]));
  return { records, rings };
}

/** Runs SQL on a file and closes it again. */
function exec(file: string, sql: string): void {
  const db = new DatabaseSync(file);
  try {
    db.exec(sql);
  } finally {
    db.close();
  }
}

function metaVersion(file: string): string {
  const db = new DatabaseSync(file, { readOnly: true });
  try {
    return (db.prepare("SELECT value FROM meta WHERE key = 'version'").get() as { value: string }).value;
  } finally {
    db.close();
  }
}

/** Every row of every table, to compare a file before and after. */
function contentOf(file: string): Record<string, unknown[]> {
  const db = new DatabaseSync(file, { readOnly: true });
  try {
    const tables = (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all() as { name: string }[]).map((t) => t.name);
    return Object.fromEntries(tables.map((t) => [t, db.prepare(`SELECT * FROM "${t}" ORDER BY 1, 2`).all().map((r) => ({ ...r }))]));
  } finally {
    db.close();
  }
}

describe('durable state: the SQLite format versions and their migrations', () => {
  const dirs: string[] = [];
  const dir = (): string => {
    const d = tempDir();
    dirs.push(d);
    return d;
  };
  after(() => {
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });

  it('the version this release writes is 1 plus one per migration, and each migration names the version it makes', () => {
    expect(STATE_FORMAT_VERSION).to.equal(1 + SQLITE_MIGRATIONS.length);
    SQLITE_MIGRATIONS.forEach((m, i) => expect(m.to, m.summary).to.equal(i + 2));
  });

  it('the committed fixture is format version 1 and holds exactly records.json', () => {
    const d = dir();
    const file = copyV1StateFile(d);
    expect(metaVersion(file)).to.equal('1');
    expect(fixtureRecords().formatVersion).to.equal(1);
    const rows = contentOf(file) as { records: { ns: string; key: string; value: string }[]; rings: { ns: string; seq: number; value: string }[] };
    const records: FixtureRecords['records'] = {};
    for (const r of rows.records) (records[r.ns] ??= {})[r.key] = r.value;
    const rings: FixtureRecords['rings'] = {};
    for (const r of [...rows.rings].sort((a, b) => a.seq - b.seq)) (rings[r.ns] ??= []).push({ seq: r.seq, value: r.value });
    expect({ records, rings }).to.deep.equal(sortedFixture());
    expect(fs.existsSync(path.join(STATE_V1_DIR, `${STATE_FILE_NAME}-wal`)), 'the fixture is one file, never opened in place').to.equal(false);
  });

  for (let step = 1; step <= SQLITE_MIGRATIONS.length; step++) {
    const upTo = SQLITE_MIGRATIONS.slice(0, step);
    it(`from version 1 to ${step + 1} (${(upTo.at(-1) as SqliteMigration).summary}): every record kept, the file checks`, () => {
      const file = copyV1StateFile(dir());
      const db = new DatabaseSync(file);
      try {
        expect(migrateStateFile(db, 1, upTo)).to.deep.equal({ from: 1, to: step + 1 });
        expect((db.prepare('PRAGMA quick_check').get() as { quick_check: string }).quick_check).to.equal('ok');
        // Whatever the tables of that version, every record and ring entry is one row of one of them.
        const tables = (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name <> 'meta'").all() as { name: string }[]).map((t) => t.name);
        const rows = tables.reduce((n, t) => n + (db.prepare(`SELECT count(*) AS n FROM "${t}"`).get() as { n: number }).n, 0);
        const f = fixtureRecords();
        const expected = Object.values(f.records).reduce((n, m) => n + Object.keys(m).length, 0) + Object.values(f.rings).reduce((n, l) => n + l.length, 0);
        expect(rows, 'no record lost or doubled').to.equal(expected);
      } finally {
        db.close();
      }
      expect(metaVersion(file)).to.equal(String(step + 1));
    });
  }

  it(`the store opens the version-1 file: migrated to ${STATE_FORMAT_VERSION}, every record back byte for byte, sessions oldest first; the next open migrates nothing`, async () => {
    const d = dir();
    copyV1StateFile(d);
    const store = new SqliteStateStore(d);
    const s = await readWholeState(store);
    const order: string[] = [];
    await store.readSessions((rows) => order.push(...rows.keys));
    await store.close();
    expect(s.movedAside).to.equal(null);
    expect(s.migrated).to.deep.equal({ from: 1, to: STATE_FORMAT_VERSION });
    expect(asFixture(s)).to.deep.equal(sortedFixture());
    const lastSeen = (key: string): number => (JSON.parse(fixtureRecords().records.sessions?.[key] as string) as { last_seen: number }).last_seen;
    expect(order.map(lastSeen)).to.deep.equal(order.map(lastSeen).sort((a, b) => a - b));
    const again = new SqliteStateStore(d);
    const s2 = await readWholeState(again);
    await again.close();
    expect(s2.migrated).to.equal(null);
    expect(asFixture(s2)).to.deep.equal(sortedFixture());
    expect(fs.statSync(path.join(d, STATE_FILE_NAME)).mode & 0o777).to.equal(0o600);
  });

  it('a migration that fails leaves the file as it was (one transaction) and refuses the open', () => {
    const d = dir();
    const file = copyV1StateFile(d);
    const before = contentOf(file);
    const failing: SqliteMigration[] = [
      ...SQLITE_MIGRATIONS,
      {
        to: currentVersion(SQLITE_MIGRATIONS) + 1,
        summary: 'test: fails half way',
        apply(db) {
          db.exec("DELETE FROM records WHERE ns = 'health'");
          throw new Error('no room left on the device');
        },
      },
    ];
    const db = new DatabaseSync(file);
    try {
      expect(() => migrateStateFile(db, 1, failing)).to.throw(MigrationFailed, /no room/);
    } finally {
      db.close();
    }
    expect(contentOf(file), 'every step before it rolled back too').to.deep.equal(before);
    let failure: StateOpenFailure | undefined;
    try {
      openStateFile(file, failing);
    } catch (error) {
      expect(error).to.be.instanceOf(StateFileFailure);
      failure = (error as StateFileFailure).failure;
    }
    expect(failure).to.deep.include({ kind: 'migration', from: 1 });
    expect(contentOf(file)).to.deep.equal(before);
    expect(fs.readdirSync(d).filter((n) => n.includes('unusable')), 'nothing moved aside').to.deep.equal([]);
  });

  const refused: [string, (file: string) => void, StateOpenFailure['kind']][] = [
    [
      'a newer format version',
      (file) => {
        copyV1StateFile(path.dirname(file));
        exec(file, `UPDATE meta SET value = '${STATE_FORMAT_VERSION + 1}' WHERE key = 'version'`);
      },
      'newer',
    ],
    ['another program’s database', (file) => exec(file, 'CREATE TABLE records (x); INSERT INTO records VALUES (1);'), 'foreign'],
    [
      'another program’s meta table',
      (file) => exec(file, "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL); INSERT INTO meta VALUES ('format', 'other-state'), ('version', '1');"),
      'foreign',
    ],
    ['a directory where the file should be', (file) => fs.mkdirSync(file), 'foreign'],
  ];
  for (const [name, make, kind] of refused) {
    it(`${name}: refused (${kind}), left byte for byte as it was, nothing moved aside`, async () => {
      const d = dir();
      const file = path.join(d, STATE_FILE_NAME);
      make(file);
      const before = fs.statSync(file).isFile() ? fs.readFileSync(file) : null;
      const store = new SqliteStateStore(d);
      let error: unknown;
      await store.open().catch((e: unknown) => (error = e));
      await store.close();
      expect(error).to.be.instanceOf(StateOpenError);
      expect((error as StateOpenError).failure.kind).to.equal(kind);
      if (before) expect(fs.readFileSync(file).equals(before)).to.equal(true);
      expect(fs.readdirSync(d).filter((n) => n.includes('unusable'))).to.deep.equal([]);
    });
  }

  it('a first start that stopped before it wrote its meta (empty tables of ours) is as good as new', async () => {
    const d = dir();
    const file = path.join(d, STATE_FILE_NAME);
    exec(file, 'CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID; CREATE TABLE records (ns TEXT, key TEXT, value TEXT);');
    const store = new SqliteStateStore(d);
    const s = await store.open();
    await store.close();
    expect([s.movedAside, s.migrated]).to.deep.equal([null, null]);
    expect(metaVersion(file)).to.equal(String(STATE_FORMAT_VERSION));
  });
});
