import { expect } from 'chai';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { AuditEvent } from '../../shared/api/audit-event.js';
import type { ExitsView, InstanceView, SessionView, StatsSample } from '../../shared/api/views.js';
import { STATE_FLUSH_MS } from '../../supervisor/state/durable-state.js';
import { STATE_FILE_NAME } from '../../supervisor/state/sqlite-state-store.js';
import { HealApi } from '../support/clients/api-client.js';
import { exitIpOf, fetchThroughSession } from '../support/clients/session-fetch.js';
import { startService, SUITE_READY_TIMEOUT_MS, type RunningService } from '../support/fixtures/service.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { whileExitServesCaptcha } from '../support/clients/captcha-exit.js';
import { isAlive } from '../support/processes/inspection.js';
import { pollUntil } from '../support/waiting.js';
import { startRedis, type RunningRedis } from '../support/processes/redis-server.js';

const POOL = 4;
const SESSIONS = 20;
/** Reports within ROTATION_GRACE of an instance's rotation are not held against it: kept short here. */
const ROTATION_GRACE_MS = 1000;


async function started(dataDir: string, env: Record<string, string> = {}, ready = POOL): Promise<{ svc: RunningService; api: HealApi }> {
  // MIN_ELIGIBLE_EXITS_PER_COUNTRY 0: most countries of the test network have one exit, whose ban the floor would withhold.
  const svc = await startService({ POOL_SIZE: String(POOL), MIN_ELIGIBLE_EXITS_PER_COUNTRY: '0', DATA_DIR: dataDir, ROTATION_GRACE: `${ROTATION_GRACE_MS}ms`, CLIENT_REPORT_BUDGET: '1000/1m', ...env });
  await svc.waitReady(ready, SUITE_READY_TIMEOUT_MS);
  return { svc, api: await HealApi.signIn(svc) };
}

/** Every tor of the service (their PIDs, from the instances view). */
async function torPids(api: HealApi): Promise<number[]> {
  return (await api.instances()).map((i) => i.pid).filter((p) => p > 0);
}

describe('durable state across restarts (real service, private network)', function () {
  this.timeout(SUITE_READY_TIMEOUT_MS * 3);
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-durable-'));
  let running: RunningService | undefined;

  after(async () => {
    if (running) await running.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });
  // A test that failed may leave its service running on dataDir: the next one would start a
  // second service there, whose tors find the data directories locked.
  afterEach(async function () {
    if (this.currentTest?.state !== 'failed' || !running) return;
    await running.stop();
    running = undefined;
  });

  it('keeps 20 sessions on their exit IPs, a ban, the audit trail and the stats history across SIGTERM and start', async () => {
    let { svc, api } = await started(dataDir);
    running = svc;
    const keys = Array.from({ length: SESSIONS }, (_, i) => `durable-${i}`);
    const before = new Map<string, string>();
    for (const key of keys) before.set(key, await exitIpOf(svc, key));
    // Placement puts a new session on the least-loaded routable instance, so with the whole pool
    // routable the 20 sit 5 to an instance. One instance briefly out of service (a slow circuit
    // on a loaded machine) may be skipped: at least POOL - 1 instances, and their distinct exits.
    const onInstance = new Map<number, number>();
    for (const s of await api.sessions()) if (keys.includes(s.key)) onInstance.set(s.instance, (onInstance.get(s.instance) ?? 0) + 1);
    expect(onInstance.size, `the sessions spread over the pool (${JSON.stringify([...onInstance])})`).to.be.at.least(POOL - 1);
    expect(Math.max(...onInstance.values()), 'least-loaded placement').to.be.at.most(Math.ceil(SESSIONS / (POOL - 1)));
    expect(new Set([...before.values()]).size, 'each of those instances on its own exit').to.be.at.least(POOL - 1);

    // Burn one exit for everyone: two independent reporters (tokens of two owners) each report a
    // captcha through it (supervisor/verdicts); its instance moves to another exit.
    const burnt = keys[0] as string;
    const burntIp = before.get(burnt) as string;
    const burntInstance = (await api.session(burnt)).instance;
    const fingerprint = (await api.instance(burntInstance)).assigned_exit?.fingerprint as string;
    const sameExit = (await api.sessions()).find((s) => s.key !== burnt && keys.includes(s.key) && s.instance === burntInstance)?.key as string;
    expect(sameExit, 'another of the 20 on the same instance').to.be.a('string');
    const owners = await Promise.all(['acme', 'globex'].map(async (owner) => (await api.json<{ secret: string }>('/api/tokens', { method: 'POST', body: { name: owner, scope: 'proxy', owner } }, 201)).secret));
    await whileExitServesCaptcha(svc, burntIp, ROTATION_GRACE_MS + 500, async () => {
      for (const [i, key] of [burnt, sameExit].entries()) {
        expect((await fetchThroughSession(svc, key)).kind).to.equal('captcha');
        await api.json(`/api/sessions/${key}/failure`, { method: 'POST', body: { kind: 'captcha' }, bearer: owners[i] as string });
      }
      await pollUntil('the exit banned', () => api.json<ExitsView>('/api/exits'), 10_000, { until: (v) => v.bans.some((b) => b.fingerprint === fingerprint) });
      await pollUntil('its instance on another exit', () => api.instance(burntInstance), 90_000, {
        until: (v: InstanceView) => ['healthy', 'probation', 'degraded'].includes(v.health.state) && !v.rotating && v.assigned_exit !== null && v.assigned_exit.fingerprint !== fingerprint,
      });
    });
    // Where every session leaves now (the quarantine moved some), and what it has counted.
    for (const key of keys) before.set(key, await exitIpOf(svc, key));
    expect([...before.values()], 'no session on the banned exit').to.not.include(burntIp);
    const sessionsBefore = new Map((await api.sessions()).map((s) => [s.key, s]));
    const banBefore = (await api.json<ExitsView>('/api/exits')).bans.find((b) => b.fingerprint === fingerprint);
    const eventsBefore = await api.events(1000);
    const lastEventBefore = (eventsBefore[0] as AuditEvent).id;
    const fineBefore = await api.json<StatsSample[]>('/api/stats/history?range=fine');
    await sleep(2 * STATE_FLUSH_MS);

    expect(await svc.stop()).to.equal(0);
    running = undefined;
    const stoppedAt = Date.now();
    expect(fs.existsSync(path.join(dataDir, STATE_FILE_NAME))).to.equal(true);

    // Asked as soon as the proxies serve (one instance up): a session whose instance is still
    // bootstrapping is refused for a moment, never moved to another exit.
    ({ svc, api } = await started(dataDir, {}, 1));
    running = svc;
    expect(svc.output()).to.match(/durable state restored/);
    for (const key of keys) {
      const got = await pollUntil(`${key} served`, () => fetchThroughSession(svc, key), 60_000, { until: (f) => f.kind === 'ip' });
      expect(got.kind === 'ip' && got.ip, `${key} leaves through the IP it had`).to.equal(before.get(key));
    }
    await svc.waitReady(POOL, SUITE_READY_TIMEOUT_MS);
    // The requests just made reach the counts with the worker's next accounting batch
    // (ACCOUNTING_FLUSH_MS): the last one may not have arrived when every instance is ready.
    const countedOn = (s: SessionView): boolean => !keys.includes(s.key) || s.requests > (sessionsBefore.get(s.key)?.requests ?? 0);
    const sessionsAfter = new Map(
      (await pollUntil('every session’s request since the start accounted', () => api.sessions(), 10_000, { until: (all) => all.every(countedOn) })).map((s) => [s.key, s]),
    );
    for (const key of keys) {
      const was = sessionsBefore.get(key) as SessionView;
      const now = sessionsAfter.get(key) as SessionView;
      expect(now.created_at, key).to.equal(was.created_at);
      expect(now.requests, `${key} counts on from ${was.requests}`).to.be.greaterThan(was.requests);
      expect(now.instance, key).to.equal(was.instance);
    }
    // The ban holds, with its own end.
    const exits = await api.json<ExitsView>('/api/exits');
    expect(exits.bans.find((b) => b.fingerprint === fingerprint)).to.deep.equal(banBefore);
    expect(exits.exits.find((e) => e.fingerprint === fingerprint)?.instances ?? [], 'nobody has the banned exit').to.deep.equal([]);
    // The audit trail goes on: the events of before are there, the new ones follow them.
    const eventsAfter = await api.events(1000);
    expect(eventsAfter.some((e) => e.id === lastEventBefore && e.message === (eventsBefore[0] as AuditEvent).message)).to.equal(true);
    expect(eventsAfter.some((e) => e.type === 'quarantine' && e.instance === burntInstance)).to.equal(true);
    expect((eventsAfter[0] as AuditEvent).id).to.be.greaterThan(lastEventBefore);
    expect(eventsAfter.filter((e) => e.type === 'exit' && e.details.why === 'restored').length, 'instances took their exits back').to.equal(POOL);
    // The stats history too: the samples of before are there, and the new process's follow them.
    const lastBefore = (fineBefore[fineBefore.length - 1] as StatsSample).time;
    const fineAfter = await pollUntil('samples taken after the restart', () => api.json<StatsSample[]>('/api/stats/history?range=fine'), 30_000, {
      until: (v) => v.some((s) => Date.parse(s.time) > stoppedAt),
    });
    const times = fineAfter.map((s) => s.time);
    const kept = times.indexOf(lastBefore);
    expect(kept, 'the last sample of before is kept').to.be.at.least(0);
    const firstNew = fineAfter.findIndex((s) => Date.parse(s.time) > stoppedAt);
    expect(firstNew, 'the new samples are appended after the kept ones').to.be.greaterThan(kept);
    expect(times.slice(kept).every((t, i, a) => i === 0 || Date.parse(t) > Date.parse(a[i - 1] as string)), 'in time order').to.equal(true);
  });

  it('loads after a kill -9 of the supervisor during traffic, started again at once, and serves', async () => {
    const svc = running as RunningService;
    const api = await HealApi.signIn(svc);
    const keys = Array.from({ length: 8 }, (_, i) => `kill-${i}`);
    for (const key of keys) await exitIpOf(svc, key);
    await sleep(2 * STATE_FLUSH_MS);
    const tors = await torPids(api);
    let stop = false;
    const traffic = Promise.all(
      keys.map(async (key) => {
        while (!stop) await fetchThroughSession(svc, key).catch(() => undefined);
      }),
    );
    await sleep(1500);
    process.kill(svc.pid, 'SIGKILL');
    stop = true;
    await traffic;
    running = undefined;
    // Started again at once, as pm2 or a shell loop would: the killed service's tors still hold
    // their data directories (each notices its owner's death only at its next poll, up to 15 s
    // later), so the new supervisor ends them before it starts its own there.
    const leftAtRestart = tors.filter(isAlive);
    expect(leftAtRestart.length, 'the old tors have not noticed yet').to.be.greaterThan(0);
    const again = await started(dataDir);
    running = again.svc;
    expect(tors.filter(isAlive), 'the killed service’s tors').to.deep.equal([]);
    const ended = again.svc
      .output()
      .split('\n')
      .filter((line) => line.includes('ended tors left running by a previous supervisor'));
    // One line for all of them, at the start; each old tor it names was still running at the restart.
    expect(ended, again.svc.output()).to.have.length(1);
    const named = /pids=\[([\d,]+)\]/.exec(ended[0] as string)?.[1]?.split(',').map(Number) ?? [];
    expect(named.length, ended[0]).to.be.greaterThan(0);
    for (const pid of named) expect(leftAtRestart, ended[0]).to.include(pid);
    const sessions = new Map((await again.api.sessions()).map((s) => [s.key, s]));
    for (const key of keys) expect(sessions.has(key), `${key} restored`).to.equal(true);
    for (const key of keys) {
      const got = await fetchThroughSession(again.svc, key);
      expect(got.kind, `${key}: ${JSON.stringify(got)}; the service printed last:\n${again.svc.output().slice(-6000)}`).to.equal('ip');
    }
    await again.svc.stop();
    running = undefined;
  });

  for (const [name, spoil] of [
    ['garbage', (file: string) => fs.writeFileSync(file, 'this is not a database\n'.repeat(200))],
    ['truncated', (file: string) => fs.truncateSync(file, Math.floor(fs.statSync(file).size / 3))],
  ] as const) {
    it(`moves a ${name} (proven corrupt) state file aside with an error line and starts empty, credentials untouched`, async () => {
      const copy = fs.mkdtempSync(path.join(os.tmpdir(), `exitpool-${name}-`));
      try {
        fs.cpSync(dataDir, copy, { recursive: true });
        const file = path.join(copy, STATE_FILE_NAME);
        for (const side of ['-wal', '-shm']) fs.rmSync(file + side, { force: true });
        spoil(file);
        const auth = fs.readFileSync(path.join(copy, 'auth.json'), 'utf8');
        const { svc, api } = await started(copy);
        running = svc;
        expect(svc.output()).to.match(/the durable state was proven corrupt: moved aside/);
        const aside = fs.readdirSync(copy).filter((f) => f.startsWith(`${STATE_FILE_NAME}.unusable-`) && !f.endsWith('-wal') && !f.endsWith('-shm'));
        expect(aside).to.have.length(1);
        expect(fs.readFileSync(path.join(copy, aside[0] as string)).length, 'kept as it was').to.be.greaterThan(0);
        expect(await api.sessions()).to.deep.equal([]);
        // The proxy token in auth.json still opens the proxy.
        expect(fs.readFileSync(path.join(copy, 'auth.json'), 'utf8')).to.equal(auth);
        expect((await fetchThroughSession(svc, 'after-corruption')).kind).to.equal('ip');
        expect(await svc.stop()).to.equal(0);
        running = undefined;
      } finally {
        fs.rmSync(copy, { recursive: true, force: true });
      }
    });
  }

  it('starts from a clean slate with STATE_STORE=none', async () => {
    const { svc, api } = await started(dataDir, { STATE_STORE: 'none' });
    running = svc;
    expect(await api.sessions()).to.deep.equal([]);
    expect(svc.output()).to.not.match(/durable state restored/);
    expect(await svc.stop()).to.equal(0);
    running = undefined;
  });
});

describe('durable state in Redis (STATE_STORE=redis://…, real service, private network)', function () {
  this.timeout(SUITE_READY_TIMEOUT_MS * 2);
  let redis: RunningRedis;
  let running: RunningService | undefined;
  const dirs: string[] = [];
  before(async () => {
    redis = await startRedis();
  });
  after(async () => {
    if (running) await running.stop();
    await redis.stop();
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });

  it('keeps sessions on their exit IPs across a restart on another DATA_DIR (a new host), and keeps the Redis URL out of the logs', async () => {
    // At least REDIS_PASSWORD_MIN_LENGTH characters: a shorter one is refused at start.
    const redisPassword = 's3cret-pass-of-the-e2e';
    const url = `redis://:${redisPassword}@127.0.0.1:${redis.port}/e2e`;
    // The test's redis has no password: requirepass makes the URL's credential real.
    const { Redis } = await import('ioredis');
    const admin = new Redis(redis.url);
    await admin.config('SET', 'requirepass', redisPassword);
    admin.disconnect();
    const first = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-redis-a-'));
    const second = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-redis-b-'));
    dirs.push(first, second);
    let { svc } = await started(first, { STATE_STORE: url });
    running = svc;
    const keys = Array.from({ length: 8 }, (_, i) => `redis-${i}`);
    const before = new Map<string, string>();
    for (const key of keys) before.set(key, await exitIpOf(svc, key));
    await sleep(2 * STATE_FLUSH_MS);
    expect(await svc.stop()).to.equal(0);
    running = undefined;
    expect(fs.existsSync(path.join(first, STATE_FILE_NAME)), 'nothing written to DATA_DIR/state.db').to.equal(false);
    ({ svc } = await started(second, { STATE_STORE: url }));
    running = svc;
    expect(svc.output()).to.match(/durable state restored/);
    expect(svc.output()).to.not.include(redisPassword);
    for (const key of keys) expect(await exitIpOf(svc, key), key).to.equal(before.get(key));
    expect(await svc.stop()).to.equal(0);
    running = undefined;
  });

  it('refuses to start, naming STATE_STORE, when Redis cannot be reached', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-redis-down-'));
    dirs.push(dir);
    const svc = await startService({ POOL_SIZE: '1', DATA_DIR: dir, STATE_STORE: 'redis://127.0.0.1:1/down' });
    await pollUntil('the start refused', () => svc.output(), 30_000, { until: (out) => /STATE_STORE: Redis at/.test(out) });
    await sleep(500);
    expect(await svc.stop()).to.equal(78);
    expect(svc.output()).to.match(/STATE_STORE: Redis at redis:\/\/127\.0\.0\.1:1\/down cannot be reached/);
  });
});
