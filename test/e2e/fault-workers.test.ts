import { expect } from 'chai';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { WORKER_EXIT_MARGIN_MS } from '../../supervisor/cluster/worker-manager.js';
import { DEFAULT_STOP_GRACE_MS } from '../../supervisor/tor/tor-process.js';
import { ACCOUNTING_FLUSH_MS } from '../../shared/ipc/protocol.js';
import { curl } from '../support/clients/curl.js';
import { instances, poolSummary, session, sessions, settledTotals } from '../support/clients/api-waits.js';
import { DripServer } from '../support/network/drip-server.js';
import { isAlive, serviceWorkers, signal } from '../support/processes/inspection.js';
import { pollUntil } from '../support/waiting.js';
import { ReconnectingStream } from '../support/clients/sse-raw.js';
import { Tmpfs, setImmutable } from '../support/fixtures/tmpfs.js';
import { TrafficLoops, socksRequest, type RequestRecord } from '../support/network/traffic.js';
import { TEST_PROXY_TOKEN, startService, type RunningService } from '../support/fixtures/service.js';

/** Tor's own SIGTERM grace in the service (supervisor/tor/instance.ts) plus the workers' grace and slack. */
// The service drains open connections for SHUTDOWN_GRACE (the streaming request below holds one
// for the whole grace), then the workers get their exit margin and the tors their stop grace.
const SHUTDOWN_GRACE_MS = 5_000;
const SHUTDOWN_DEADLINE_MS = SHUTDOWN_GRACE_MS + WORKER_EXIT_MARGIN_MS + DEFAULT_STOP_GRACE_MS + 5_000;

interface CreatedToken {
  id: string;
  secret: string;
}

function describeFailures(records: readonly RequestRecord[]): string {
  return records
    .filter((r) => !r.ok)
    .map((r) => `${r.listener} ${r.key} ${r.startedAt}-${r.endedAt}: ${r.error}`)
    .join('\n');
}

function refusesConnections(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port });
    s.once('connect', () => {
      s.destroy();
      resolve(false);
    });
    s.once('error', (e: NodeJS.ErrnoException) => resolve(e.code === 'ECONNREFUSED'));
  });
}

/**
 * Faults of the service's own processes and of its disk, on the private network with the real
 * CLI: a proxy worker and the API worker killed with SIGKILL under load, DATA_DIR read-only and
 * full while a token is issued, and SIGTERM in the middle of traffic. One service for the file;
 * its DATA_DIR lives on a small tmpfs so the disk faults are real filesystem conditions.
 */
describe('faults: worker processes, DATA_DIR and SIGTERM (real service, private network)', function () {
  this.timeout(240_000);
  let tmpfs: Tmpfs;
  let dataDir: string;
  let drip: DripServer;
  let svc: RunningService;
  let admin: string;
  const proxy = { socksPort: 0, httpPort: 0, token: TEST_PROXY_TOKEN };
  const keys = ['fw-a', 'fw-b', 'fw-c', 'fw-d', 'fw-e', 'fw-f'];

  before(async function () {
    this.timeout(300_000);
    tmpfs = Tmpfs.mount(64 * 1024 * 1024);
    dataDir = path.join(tmpfs.dir, 'data');
    fs.mkdirSync(dataDir, { mode: 0o700 });
    drip = await DripServer.start();
    svc = await startService({ POOL_SIZE: '3', PROXY_WORKERS: '2', DATA_DIR: dataDir, SHUTDOWN_GRACE: `${SHUTDOWN_GRACE_MS}ms` });
    await svc.waitReady(3, 180_000);
    admin = await svc.login();
    proxy.socksPort = svc.socksPort;
    proxy.httpPort = svc.httpPort;
    for (const key of keys) {
      const r = await socksRequest(proxy, key, svc.whoamiUrl, 30_000);
      expect(r.ok, `warm-up ${key}: ${r.error}`).to.equal(true);
    }
  });

  after(async function () {
    this.timeout(60_000);
    if (dataDir && fs.existsSync(dataDir)) setImmutable(dataDir, false);
    try {
      await svc?.stop();
    } finally {
      await drip?.close();
      tmpfs?.unmount();
    }
  });

  it('re-forks a proxy worker killed with SIGKILL under load; the other keeps serving, sessions and counts stay exact', async () => {
    const before = serviceWorkers(svc.pid);
    expect(before.api, 'API workers').to.have.length(1);
    expect(before.proxy, 'proxy workers').to.have.length(2);
    const placedBefore = new Map<string, number>();
    for (const key of keys) placedBefore.set(key, (await session(svc, admin, key)).instance);
    // The warm-up's last closes may still be in a worker's batch: count from settled totals.
    const totalsBefore = await settledTotals(svc, admin);

    const loops = new TrafficLoops(proxy, keys, svc.whoamiUrl, 30_000);
    loops.start();
    await pollUntil('traffic flowing', () => (loops.records.filter((r) => r.ok).length >= 12 ? true : undefined), 60_000);
    const victim = before.proxy[0] as number;
    const killedAt = Date.now();
    expect(signal(victim, 'SIGKILL')).to.equal(true);
    const replacement = await pollUntil(
      'a new proxy worker',
      () => serviceWorkers(svc.pid).proxy.find((pid) => !before.proxy.includes(pid)),
      30_000,
    );
    const reforkedAt = Date.now();
    // Keep the load on until the new worker has certainly taken connections of its own.
    await pollUntil('traffic after the re-fork', () => (loops.records.filter((r) => r.ok && r.startedAt > reforkedAt + 1000).length >= 3 * keys.length ? true : undefined), 60_000);
    const records = await loops.stop();

    expect(isAlive(victim), 'killed worker').to.equal(false);
    expect(isAlive(replacement), 'replacement worker').to.equal(true);
    expect(serviceWorkers(svc.pid).proxy, 'proxy workers after the re-fork').to.have.length(2);
    expect(svc.output()).to.match(/worker died; re-forking/);

    // Only requests that were on the killed worker's connections may fail: at most one per loop,
    // each in flight at the kill. Everything started after the kill was served.
    const failed = records.filter((r) => !r.ok);
    expect(failed.length, describeFailures(records)).to.be.at.most(keys.length);
    for (const r of failed) expect(r.startedAt, describeFailures(records)).to.be.at.most(killedAt + 500);
    const afterKill = records.filter((r) => r.startedAt > killedAt + 500);
    expect(afterKill.length).to.be.at.least(3 * keys.length);

    // Sessions live in the supervisor: same key, same instance, same exit.
    for (const key of keys) {
      expect((await session(svc, admin, key)).instance, `instance of ${key}`).to.equal(placedBefore.get(key));
      const exits = new Set(records.filter((r) => r.key === key && r.ok).map((r) => r.body.trim()));
      expect([...exits], `exits seen by ${key}`).to.have.length(1);
    }

    // Exact counts after a crash: no session keeps phantom live connections of the dead worker.
    await pollUntil(
      'every session idle',
      async () => ((await sessions(svc, admin)).every((s) => s.active === 0) ? true : undefined),
      15_000,
    );
    // Nothing counted twice; nothing lost but the dead worker's in-flight and not-yet-flushed closes.
    const totalsAfter = await settledTotals(svc, admin);
    const counted = totalsAfter.requests - totalsBefore.requests;
    const unflushedWindow = records.filter((r) => r.ok && r.endedAt >= killedAt - 4 * ACCOUNTING_FLUSH_MS && r.endedAt <= killedAt + 500).length;
    expect(counted, 'requests counted').to.be.at.most(records.length);
    expect(counted, 'requests counted').to.be.at.least(records.length - failed.length - unflushedWindow);
  });

  it('re-forks the API worker killed with SIGKILL; an SSE client reconnects and receives state again', async () => {
    const stream = new ReconnectingStream(`http://127.0.0.1:${svc.apiPort}/api/stream`, { Authorization: `Bearer ${admin}` });
    try {
      await stream.waitFor((f) => f.event === 'state', 1, 20_000);
      const [apiPid] = serviceWorkers(svc.pid).api;
      expect(apiPid).to.be.a('number');
      expect(signal(apiPid as number, 'SIGKILL')).to.equal(true);
      // The proxies do not depend on the API worker.
      const during = await socksRequest(proxy, keys[0] as string, svc.whoamiUrl, 30_000);
      expect(during.ok, during.error).to.equal(true);
      const replacement = await pollUntil('a new API worker', () => serviceWorkers(svc.pid).api.find((p) => p !== apiPid), 30_000);
      const frame = await stream.waitFor((f) => f.event === 'state', 2, 30_000);
      expect(frame.data).to.have.nested.property('pool.size', 3);
      expect(isAlive(apiPid as number)).to.equal(false);
      expect(isAlive(replacement)).to.equal(true);
      // The sign-in credential issued before the crash is still good (the snapshot is re-pushed).
      expect((await poolSummary(svc, admin)).size).to.equal(3);
    } finally {
      await stream.close();
    }
  });

  it('answers a clear 500 when DATA_DIR is read-only or full on token creation; nothing is lost, the service keeps running', async () => {
    const listTokens = async (): Promise<string[]> => {
      const r = await svc.api('/api/tokens', { bearer: admin });
      expect(r.status).to.equal(200);
      return ((await r.json()) as { id: string }[]).map((t) => t.id);
    };
    const create = (name: string): Promise<Response> => svc.api('/api/tokens', { method: 'POST', bearer: admin, body: { name, scope: 'proxy' } });

    const first = await create('before-faults');
    expect(first.status).to.equal(201);
    const kept = (await first.json()) as CreatedToken;
    const listed = await listTokens();
    expect(listed).to.include(kept.id);

    const faults: [string, () => void, () => void, RegExp][] = [
      ['read-only', () => setImmutable(dataDir, true), () => setImmutable(dataDir, false), /operation not permitted/i],
      ['full', () => tmpfs.fill(), () => tmpfs.unfill(), /no space/i],
    ];
    for (const [name, strike, heal, cause] of faults) {
      strike();
      let answer: Response;
      try {
        answer = await create(`during-${name}`);
      } finally {
        heal();
      }
      const text = await answer.text();
      expect(answer.status, `${name}: ${text}`).to.equal(500);
      expect(text, name).to.match(/could not save .*auth\.json/);
      expect(text, name).to.match(cause);
      expect(await listTokens(), `token list after the ${name} fault`).to.deep.equal(listed);
      // The token issued before still works on both the proxy and the API.
      const viaProxy = await socksRequest({ ...proxy, token: kept.secret }, 'fw-token', svc.whoamiUrl, 30_000);
      expect(viaProxy.ok, viaProxy.error).to.equal(true);
    }

    // Healed: issuing works again, and auth.json on disk holds every token, with no temporary files left.
    const after = await create('after-faults');
    expect(after.status).to.equal(201);
    const latest = (await after.json()) as CreatedToken;
    const onDisk = JSON.parse(fs.readFileSync(path.join(dataDir, 'auth.json'), 'utf8')) as { tokens: { id: string }[] };
    expect(onDisk.tokens.map((t) => t.id)).to.include.members([kept.id, latest.id]);
    expect(fs.readdirSync(dataDir).filter((f) => f.endsWith('.tmp'))).to.deep.equal([]);
    const health = await svc.api('/health');
    expect(health.status).to.equal(200);
    expect(isAlive(svc.pid)).to.equal(true);
  });

  it('shuts down gracefully on SIGTERM during traffic: listeners close, exit 0 within the grace, no tor left', async () => {
    const torPids = (await instances(svc, admin)).map((i) => i.pid);
    expect(torPids.every((p) => p > 0 && isAlive(p)), `tor pids ${torPids.join(',')}`).to.equal(true);
    const workerPids = [...serviceWorkers(svc.pid).api, ...serviceWorkers(svc.pid).proxy];

    const loops = new TrafficLoops(proxy, keys.slice(0, 4), svc.whoamiUrl, 30_000);
    loops.start();
    const inFlight = curl(['--socks5-hostname', `fw-drip:${TEST_PROXY_TOKEN}@127.0.0.1:${svc.socksPort}`, drip.url('/drip')], 90_000);
    await pollUntil('traffic flowing', () => (loops.records.filter((r) => r.ok).length >= 4 && drip.dripsStarted > 0 ? true : undefined), 60_000);

    const started = Date.now();
    const code = await svc.stop();
    const tookMs = Date.now() - started;
    expect(code, svc.output().slice(-3000)).to.equal(0);
    expect(tookMs, 'shutdown time').to.be.below(SHUTDOWN_DEADLINE_MS);

    // Nothing hangs on the client side: the loops and the streaming request end promptly.
    const stopDeadline = Date.now() + 15_000;
    await loops.stop();
    expect(Date.now(), 'traffic loops settled').to.be.below(stopDeadline);
    const drop = await inFlight;
    expect(drop.code, 'streaming request cut by the shutdown').to.not.equal(0);

    for (const port of [svc.socksPort, svc.httpPort, svc.apiPort]) expect(await refusesConnections(port), `port ${port} closed`).to.equal(true);
    for (const pid of [...torPids, ...workerPids]) expect(isAlive(pid), `process ${pid} after shutdown`).to.equal(false);
    // Every tor was stopped by the service with SIGTERM (not killed after the grace).
    const out = svc.output();
    for (const pid of torPids) {
      const line = out.split('\n').find((l) => l.includes('tor stopped') && new RegExp(`pid=${pid}\\b`).test(l));
      expect(line, `stop line of tor ${pid}`).to.be.a('string');
      expect(line).to.not.match(/SIGKILL/);
    }
    expect(out).to.match(/\bstopped\b/);
  });
});
