/**
 * Stored state a careful operator can trust (issue 34; docs/security.md, "Known secrets, private
 * files, upgrades"), each case as an operator or an attacker would meet it: the service binary
 * started with a known secret, a DATA_DIR someone else made, a state file it may not read, and
 * an upgrade from the state format version 1 wrote.
 */
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { fileURLToPath } from 'node:url';
import type { ExitsView, InstanceView, SessionView } from '../../shared/api/views.js';
import { ADMIN_PASSWORD_MIN_LENGTH, PROXY_TOKEN_MIN_LENGTH, REDIS_PASSWORD_MIN_LENGTH, SIGNING_SECRET_MIN_LENGTH } from '../../shared/config/secret-values.js';
import { STATE_FORMAT_VERSION } from '../../supervisor/state/sqlite-state-file.js';
import { STATE_FILE_NAME } from '../../supervisor/state/sqlite-state-store.js';
import { HealApi } from '../support/clients/api-client.js';
import { serviceEnv, startService, SUITE_READY_TIMEOUT_MS, type RunningService } from '../support/fixtures/service.js';
import { sharedTestnet } from '../support/fixtures/testnet.js';
import { servicePorts } from '../support/network/free-ports.js';
import { copyV1StateFile, shiftedRecords, shiftToNow } from '../support/state/state-fixture.js';
import { pollUntil } from '../support/waiting.js';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const BIN = path.join(repo, 'bin', 'exitpool');
/** The unprivileged user the ownership cases run the service as (Debian's nobody/nogroup). */
const NOBODY = 65534;
const EX_CONFIG = 78;

interface Exited {
  code: number | null;
  stderr: string;
  stdout: string;
}

/** bin/exitpool serve with exactly `env`, from an empty working directory (no .env), as `uid`; until it exits. */
function runBinary(env: Record<string, string>, options: { uid?: number; timeoutMs?: number } = {}): Promise<Exited> {
  const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-cwd-'));
  fs.chmodSync(cwd, 0o755);
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, 'serve'], {
      cwd,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
      ...(options.uid === undefined ? {} : { uid: options.uid, gid: options.uid }),
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`bin/exitpool did not exit within ${options.timeoutMs ?? 30_000} ms:\n${stdout}${stderr}`));
    }, options.timeoutMs ?? 30_000);
    child.once('exit', (code) => {
      clearTimeout(timer);
      fs.rmSync(cwd, { recursive: true, force: true });
      resolve({ code, stdout, stderr });
    });
  });
}

/** The lines bin/exitpool wrote to stderr (the refusal, and log lines before it), without the empty last one. */
const linesOf = (text: string): string[] => text.split('\n').filter((l) => l !== '');

/** The refusal of a start that got past the configuration: one line, the last one, after the log's. */
function refusalOf(r: Exited): string {
  const lines = linesOf(r.stderr);
  const refusals = lines.filter((l) => l.startsWith('exitpool: cannot start:'));
  expect(refusals, r.stderr).to.have.length(1);
  expect(lines.at(-1), 'it is the last line').to.equal(refusals[0]);
  return refusals[0] as string;
}

describe('known secrets: the service binary refuses each placeholder and each too-short secret (exit 78, one line)', function () {
  this.timeout(120_000);
  const example = fs.readFileSync(path.join(repo, 'deploy', 'kubernetes', 'secret.example.yaml'), 'utf8');
  const exampleValue = (key: string): string => new RegExp(`^\\s+${key}: "([^"]*)"`, 'm').exec(example)?.[1] ?? '';
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-secrets-'));
  after(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  const base = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dataDir, DATA_DIR: dataDir, EXITPOOL_PRIVATE_NETWORK_ONLY: '1', STATE_STORE: 'none' };

  const cases: [string, string, string][] = [
    ['SIGNING_SECRET', exampleValue('signing-secret'), 'the example Secret’s placeholder'],
    ['ADMIN_PASSWORD', exampleValue('admin-password'), 'the example Secret’s placeholder'],
    ['PROXY_TOKEN', exampleValue('proxy-token'), 'the example Secret’s placeholder'],
    ['STATE_STORE', exampleValue('state-store'), 'the example Secret’s Redis URL (its password)'],
    ['STATE_STORE', 'redis://:change-me@redis:6379/pool', 'the Redis URL compose used to default to'],
    ['SIGNING_SECRET', 's'.repeat(SIGNING_SECRET_MIN_LENGTH - 1), 'one character short'],
    ['ADMIN_PASSWORD', 'p'.repeat(ADMIN_PASSWORD_MIN_LENGTH - 1), 'one character short'],
    ['PROXY_TOKEN', `tp_${'t'.repeat(PROXY_TOKEN_MIN_LENGTH - 1)}`, 'one character short'],
    ['STATE_STORE', `redis://:${'r'.repeat(REDIS_PASSWORD_MIN_LENGTH - 1)}@127.0.0.1:6379/pool`, 'a Redis password one character short'],
  ];
  for (const [variable, value, what] of cases) {
    it(`${variable}: ${what}`, async () => {
      expect(value, 'the example still holds it').to.not.equal('');
      const r = await runBinary({ ...base, [variable]: value });
      expect(r.code, r.stderr).to.equal(EX_CONFIG);
      const lines = linesOf(r.stderr);
      expect(lines, r.stderr).to.have.length(1);
      expect(lines[0]).to.match(new RegExp(`^exitpool: refusing to start: invalid configuration: ${variable}: `));
      expect(lines[0]).to.match(/placeholder|at least/);
      const secret = variable === 'STATE_STORE' ? new URL(value).password : value;
      // (A bare CHANGE-ME is named: the message says what the placeholder is.)
      if (!/^change-me$/i.test(secret)) expect(r.stderr + r.stdout, 'the secret itself is not printed').to.not.include(secret);
      expect(fs.readdirSync(dataDir), 'nothing was started or written').to.deep.equal([]);
    });
  }
});

/** Every entry under `dir` with a mode that lets the group or others in (sockets and links aside). */
function openEntries(dir: string): string[] {
  const found: string[] = [];
  const walk = (p: string): void => {
    const st = fs.lstatSync(p);
    if (st.isSymbolicLink() || st.isSocket()) return;
    if ((st.mode & 0o077) !== 0) found.push(`${path.relative(dir, p) || '.'} ${(st.mode & 0o7777).toString(8)}`);
    if (st.isDirectory()) for (const n of fs.readdirSync(p)) walk(path.join(p, n));
  };
  walk(dir);
  return found;
}

describe('DATA_DIR is private whatever created it (real service, private network)', function () {
  this.timeout(SUITE_READY_TIMEOUT_MS * 2);
  const roots: string[] = [];
  let running: RunningService | undefined;
  after(async () => {
    if (running) await running.stop();
    for (const r of roots) fs.rmSync(r, { recursive: true, force: true });
  });
  const root = (): string => {
    const r = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-modes-'));
    fs.chmodSync(r, 0o755);
    roots.push(r);
    return r;
  };

  it('an operator’s 0755 DATA_DIR under a 022 umask: made 0700, every file 0600, every directory 0700, while running and after', async () => {
    const dataDir = path.join(root(), 'data');
    fs.mkdirSync(dataDir, { mode: 0o755 });
    fs.chmodSync(dataDir, 0o755);
    const old = process.umask(0o022);
    let svc: RunningService;
    try {
      // The child inherits the umask at spawn.
      svc = await startService({ POOL_SIZE: '2', DATA_DIR: dataDir });
    } finally {
      process.umask(old);
    }
    running = svc;
    await svc.waitReady(2, SUITE_READY_TIMEOUT_MS);
    for (const name of [STATE_FILE_NAME, `${STATE_FILE_NAME}-wal`, `${STATE_FILE_NAME}-shm`, 'auth.json']) {
      expect(fs.existsSync(path.join(dataDir, name)), `${name} exists`).to.equal(true);
    }
    expect(fs.statSync(dataDir).mode & 0o7777).to.equal(0o700);
    expect(openEntries(dataDir), 'entries open to the group or others while running').to.deep.equal([]);
    expect(svc.output()).to.match(/DATA_DIR: readable by other users; made private/);
    expect(await svc.stop()).to.equal(0);
    running = undefined;
    expect(openEntries(dataDir), 'after the stop').to.deep.equal([]);
  });

  it('a directory another user owns (a mounted volume) is refused with one line naming DATA_DIR, and left as it is', async () => {
    const dataDir = path.join(root(), 'volume');
    fs.mkdirSync(dataDir, { mode: 0o755 });
    fs.chmodSync(dataDir, 0o755);
    expect(process.getuid?.(), 'the test makes root own the directory and runs the service as nobody').to.equal(0);
    const net = await sharedTestnet();
    const env = serviceEnv(net, await servicePorts(2), { POOL_SIZE: '1', DATA_DIR: dataDir, HOME: dataDir });
    const r = await runBinary(env, { uid: NOBODY });
    expect(r.code, r.stderr + r.stdout).to.equal(EX_CONFIG);
    expect(refusalOf(r)).to.match(new RegExp(`^exitpool: cannot start: DATA_DIR: ${dataDir} is mode 0755 and owned by uid 0, not by this user \\(uid ${NOBODY}\\)`));
    expect(fs.statSync(dataDir).mode & 0o7777).to.equal(0o755);
    expect(fs.readdirSync(dataDir)).to.deep.equal([]);
  });

  it('a volume shared with the service’s group on purpose (fsGroup: root’s, setgid, group-writable, nothing for others) is kept and the service runs on it', async () => {
    const dataDir = path.join(root(), 'fsgroup-volume');
    fs.mkdirSync(dataDir);
    fs.chownSync(dataDir, 0, NOBODY);
    fs.chmodSync(dataDir, 0o2770);
    const net = await sharedTestnet();
    const ports = await servicePorts(2);
    const env = serviceEnv(net, ports, { POOL_SIZE: '1', DATA_DIR: dataDir, HOME: dataDir });
    const child = spawn(process.execPath, [BIN, 'serve'], { cwd: dataDir, env, uid: NOBODY, gid: NOBODY, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      await pollUntil('the service serving as nobody on the shared volume', async () => {
        if (child.exitCode !== null) throw new Error(`exited ${child.exitCode}:\n${out}`);
        const r = await fetch(`http://127.0.0.1:${ports.api}/health`).catch(() => null);
        return r?.status === 200 ? true : undefined;
      }, SUITE_READY_TIMEOUT_MS, 500);
      expect(out).to.match(/DATA_DIR is shared with this user’s group on purpose/);
      expect(fs.statSync(dataDir).mode & 0o7777, 'its mode kept').to.equal(0o2770);
      const state = fs.statSync(path.join(dataDir, STATE_FILE_NAME));
      expect([state.uid, state.mode & 0o777]).to.deep.equal([NOBODY, 0o600]);
      const entries = openEntries(dataDir).filter((e) => !e.startsWith('. '));
      expect(entries, 'inside it, nothing open to the group or others').to.deep.equal([]);
    } finally {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      expect(await exited, out.slice(-2000)).to.equal(0);
      clearTimeout(timer);
    }
  });

  it('a state file the service may not read stops the start with one line and is left byte for byte as it was', async () => {
    const dataDir = path.join(root(), 'data');
    fs.mkdirSync(dataDir, { mode: 0o700 });
    fs.chownSync(dataDir, NOBODY, NOBODY);
    // A state file root left behind (a restore from a backup as root, say): the service's user cannot open it.
    const file = copyV1StateFile(dataDir);
    const before = fs.readFileSync(file);
    const net = await sharedTestnet();
    const env = serviceEnv(net, await servicePorts(2), { POOL_SIZE: '1', DATA_DIR: dataDir, HOME: dataDir });
    const r = await runBinary(env, { uid: NOBODY });
    expect(r.code, r.stderr + r.stdout).to.equal(EX_CONFIG);
    expect(refusalOf(r)).to.match(new RegExp(`^exitpool: cannot start: DATA_DIR: the durable state at ${file} cannot be opened: permission denied .*it is left as it is`));
    expect(fs.readFileSync(file).equals(before), 'the file as it was').to.equal(true);
    expect(fs.readdirSync(dataDir).filter((n) => n.startsWith(STATE_FILE_NAME)), 'nothing moved aside, no WAL made').to.deep.equal([STATE_FILE_NAME]);
  });
});

describe('an upgrade from a state format version 1 wrote keeps sessions, bans and health (real service, private network)', function () {
  this.timeout(SUITE_READY_TIMEOUT_MS * 2);
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-upgrade-'));
  let running: RunningService | undefined;
  after(async () => {
    if (running) await running.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('starts on the version-1 file: migrated once, every session on its instance with its counters, both bans, each instance’s health and the audit trail', async () => {
    // The fixture as written a minute ago (its sessions and bans would otherwise have ended).
    const shift = shiftToNow(60_000);
    copyV1StateFile(dataDir, { shiftMs: shift });
    const expected = shiftedRecords(shift);
    const svc = await startService({ POOL_SIZE: '4', DATA_DIR: dataDir, SESSION_TTL: '1h' });
    running = svc;
    await svc.waitReady(4, SUITE_READY_TIMEOUT_MS);
    const api = await HealApi.signIn(svc);
    expect(svc.output()).to.match(/durable state migrated to this release’s format/);

    const sessions = new Map((await api.sessions()).map((s): [string, SessionView] => [s.key, s]));
    const stored = Object.entries(expected.records.sessions ?? {}).map(([key, v]) => [key, JSON.parse(v) as { instance: number; requests: number; failures: number; bytes_up: number; bytes_down: number; recent_exits: string[]; last_seen: number }] as const);
    expect(stored.length).to.equal(6);
    for (const [key, s] of stored) {
      const view = sessions.get(key);
      expect(view, `${key} restored`).to.not.equal(undefined);
      expect(view, key).to.deep.include({ instance: s.instance, requests: s.requests, failures: s.failures, bytes_up: s.bytes_up, bytes_down: s.bytes_down, recent_exits: s.recent_exits, active: 0 });
      expect(Date.parse(view?.last_seen as string), `${key} last seen`).to.equal(s.last_seen);
    }
    expect(sessions.get('fixture-dave')?.params).to.deep.equal({ countries: ['de', 'nl'], lifetime_secs: 1800, mode: 'sticky' });

    const bans = (await api.json<ExitsView>('/api/exits')).bans;
    for (const v of Object.values(expected.records['exit-bans'] ?? {})) {
      const ban = JSON.parse(v) as { fingerprint: string; domain: string; until: number; cause: string };
      const view = bans.find((b) => b.fingerprint === ban.fingerprint && b.domain === ban.domain);
      expect(view, `the ban of ${ban.fingerprint} (${ban.domain || 'everyone'})`).to.not.equal(undefined);
      expect([view?.cause, Date.parse(view?.until as string)]).to.deep.equal([ban.cause, ban.until]);
    }

    const health = new Map((await api.instances()).map((i): [number, InstanceView['health']] => [i.id, i.health]));
    expect(health.get(1), 'instance 1: its window and counts').to.deep.include({ failures_in_window: 2, transport_failures: 1, client_failures: 1 });
    expect(health.get(2), 'instance 2: after two remediations, three captcha reports').to.deep.include({ remediations: 2, client_failures: 3 });
    expect(health.get(2)?.failures_by_kind).to.deep.include({ captcha: 3 });
    expect(health.get(3)?.remediations).to.equal(1);

    const events = await api.events(1000);
    for (const id of [101, 102, 103]) expect(events.some((e) => e.id === id), `audit event ${id}`).to.equal(true);
    expect(Math.max(...events.map((e) => e.id)), 'ids go on from the highest kept').to.be.above(103);

    expect(await svc.stop(), `the first start's stop; it printed:\n${svc.output().slice(-6000)}`).to.equal(0);
    running = undefined;
    const db = new DatabaseSync(path.join(dataDir, STATE_FILE_NAME), { readOnly: true });
    try {
      expect((db.prepare("SELECT value FROM meta WHERE key = 'version'").get() as { value: string }).value).to.equal(String(STATE_FORMAT_VERSION));
    } finally {
      db.close();
    }
    // The next start migrates nothing and still has every session.
    const again = await startService({ POOL_SIZE: '4', DATA_DIR: dataDir, SESSION_TTL: '1h' });
    running = again;
    await again.waitReady(1, SUITE_READY_TIMEOUT_MS);
    expect(again.output()).to.not.match(/durable state migrated/);
    const keys = (await (await HealApi.signIn(again)).sessions()).map((s) => s.key);
    expect(keys).to.include.members(stored.map(([k]) => k));
    expect(await again.stop(), `the second start's stop; it printed:\n${again.output().slice(-6000)}`).to.equal(0);
    running = undefined;
  });
});
