import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { Testnet } from '../../internal/testnet/index.js';
import { childLogger } from '../../shared/logger.js';
import { NotBootstrappedError } from '../../supervisor/tor/errors.js';
import { STREAM_EVENTS_QUIET_MS } from '../../supervisor/tor/exit-control.js';
import { TorInstance, type TorInstanceOptions } from '../../supervisor/tor/instance.js';
import { curlThroughSocks } from '../support/clients/curl.js';
import { sharedTestnet } from '../support/fixtures/testnet.js';
import { freePort } from '../support/network/free-ports.js';
import type { OrphanInstanceReport } from '../support/processes/orphan-tor-instance.js';
import { isAlive } from '../support/processes/inspection.js';
import { waitFor } from '../support/waiting.js';

/**
 * Real tor instances (supervisor/tor) on the private loopback network: bootstrap, exit
 * knowledge confirmed against what the destination saw, rotation, crash and stall recovery,
 * keep-state vs wipe restarts, exit pinning, country restriction, and no leftovers.
 */

const log = childLogger({ component: 'e2e-tor-instance' });
const READY_TIMEOUT_MS = 120_000;
/** tor polls its owning controller every 15 s. */
const OWNER_POLL_GRACE_MS = 25_000;
const ORPHAN_CHILD_JS = join(dirname(fileURLToPath(import.meta.url)), '..', 'support', 'processes', 'orphan-tor-instance.js');
/** NEWNYM may pick the same exit again (1 in 4 with 4 exits): bounded retries. */
const MAX_ROTATIONS_FOR_A_NEW_EXIT = 6;

/** A zombie (exited, waiting for a parent that may be an init that never reaps) counts as dead. */
function rssKb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : 0;
}

/** Guard sample of a tor `state` file: rsa_id and (randomised, per-sample) sampled_on of each. */
function guardSample(stateFile: string): string[] {
  return readFileSync(stateFile, 'utf8')
    .split('\n')
    .filter((l) => l.startsWith('Guard '))
    .map((l) => `${/rsa_id=(\S+)/.exec(l)?.[1]} ${/sampled_on=(\S+)/.exec(l)?.[1]}`)
    .sort();
}

/** PIDs of live processes whose command line mentions `needle`. */
function processesMentioning(needle: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(needle)) pids.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

describe('tor instances on the private network (e2e)', function () {
  this.timeout(180_000);
  let net: Testnet;
  let root: string;
  const instances: TorInstance[] = [];
  const seenPids = new Set<number>();
  let nextIndex = 0;
  const timings: Record<string, unknown> = {};
  let a: TorInstance;
  let b: TorInstance;
  let c: TorInstance;
  let d: TorInstance;

  async function instance(options: Partial<TorInstanceOptions> = {}): Promise<TorInstance> {
    const index = nextIndex++;
    const socksPort = await freePort();
    const i = new TorInstance({
      index,
      dataDir: root,
      socksPort,
      torBinary: net.torBinary,
      defaultsTorrc: net.defaultsTorrc,
      env: { ...process.env, ...net.clientEnvironment },
      extraTorrcLines: net.clientTorrcLines,
      stallTimeoutMs: 60_000,
      log: log.child({ instance: index }),
      ...options,
    });
    i.on('state', () => {
      if (i.pid) seenPids.add(i.pid);
    });
    instances.push(i);
    return i;
  }

  /** Starts (or waits for) an instance and returns milliseconds to ready. */
  async function startReady(i: TorInstance): Promise<number> {
    const started = Date.now();
    await i.start();
    seenPids.add(i.pid!);
    await i.whenReady(READY_TIMEOUT_MS);
    return Date.now() - started;
  }

  /** The instance's SocksPort: the path of its Unix socket. */
  function socksPort(i: TorInstance): string {
    expect(i.socksAddr).to.match(/^unix:\//);
    return i.socksAddr.slice('unix:'.length);
  }

  /** One request through the instance's SocksPort; the destination's view of the source IP. */
  async function whoami(i: TorInstance): Promise<string> {
    const result = await curlThroughSocks(socksPort(i), net.whoami.url('/'));
    expect(result.exitCode, `curl via instance ${i.index}: ${result.stderr}`).to.equal(0);
    expect(result.httpStatus).to.equal(200);
    return result.body.trim();
  }

  /**
   * After a request, the instance must name the exit the destination saw (by its source `ip`),
   * confirmed. tor knows only the relay's published address: for an exit whose traffic leaves
   * from another address (the test network has two), exitIp is the published one.
   */
  async function expectConfirmedExit(i: TorInstance, ip: string): Promise<void> {
    const exit = net.exits.find((e) => e.egressAddress === ip);
    expect(exit, `${ip} is an exit of the network`).to.not.equal(undefined);
    await waitFor(`instance ${i.index} confirms ${exit!.address} (has ${JSON.stringify(i.exit)})`, () => i.exit.exitConfirmed && i.exit.exitIp === exit!.address, 5_000);
    expect(i.exit).to.deep.include({
      exitIp: exit!.address,
      exitCountry: exit!.country,
      exitNickname: exit!.nickname,
      exitFingerprint: exit!.fingerprint,
      exitConfirmed: true,
      retiredExitIp: '',
      rotating: false,
    });
  }

  before(async function () {
    this.timeout(300_000);
    net = await sharedTestnet();
    root = join(net.workDir, 'tor-instances');
    log.info('shared network ready', { usableAfterMs: net.usableAfterMs, exits: net.exits.map((e) => `${e.nickname}/${e.address}/${e.country}`) });
  });

  after(async function () {
    this.timeout(60_000);
    await Promise.all(instances.map((i) => i.stop()));
    log.info('tor instance timings', timings);
    console.log(`tor e2e timings: ${JSON.stringify(timings)}`);
  });

  it('bootstraps one instance to 100 %', async () => {
    a = await instance();
    const percents: number[] = [];
    a.on('bootstrap', ({ percent }) => percents.push(percent));
    timings.bootstrapOneMs = await startReady(a);
    expect(a.snapshot()).to.deep.include({ ready: true, running: true, bootstrap: 100, lifecycle: 'ready' });
    expect(percents[percents.length - 1]).to.equal(100);
  });

  it('bootstraps three instances in parallel to 100 %', async () => {
    [b, c, d] = await Promise.all([instance(), instance(), instance()]);
    const started = Date.now();
    const each = await Promise.all([b, c, d].map(startReady));
    timings.bootstrapThreeParallelMs = { each, all: Date.now() - started };
    for (const i of [b, c, d]) expect(i.snapshot()).to.deep.include({ ready: true, bootstrap: 100 });
    timings.rssKbPerInstance = [a, b, c, d].map((i) => rssKb(i.pid!));
  });

  it('names the exit that carried a request: exit_ip is the source IP the destination saw, confirmed, with its country', async () => {
    for (const i of [a, b, c, d]) {
      const ip = await whoami(i);
      await expectConfirmedExit(i, ip);
      // Sticky: the next request leaves through the same exit.
      expect(await whoami(i)).to.equal(ip);
    }
  });

  it('rotates to a new exit and shows the retired exit meanwhile', async () => {
    let old = await whoami(b);
    await expectConfirmedExit(b, old);
    const rotationMs: number[] = [];
    let changed = false;
    for (let attempt = 1; attempt <= MAX_ROTATIONS_FOR_A_NEW_EXIT && !changed; attempt++) {
      const started = Date.now();
      const ticket = b.rotate();
      expect(b.rotating).to.equal(true);
      expect(b.exit).to.deep.include({ exitIp: '', retiredExitIp: old, rotating: true });
      const done = await ticket.done;
      expect(done.ok, JSON.stringify(done)).to.equal(true);
      rotationMs.push(Date.now() - started);
      expect(b.exit.retiredExitIp).to.equal('');
      expect(b.exit.exitIp).to.not.equal('');
      const now = await whoami(b);
      await expectConfirmedExit(b, now);
      changed = now !== old;
      log.info('rotation attempt', { attempt, from: old, to: now });
      old = now;
    }
    timings.rotationToNewExitKnownMs = rotationMs;
    expect(changed, `a new exit within ${MAX_ROTATIONS_FOR_A_NEW_EXIT} rotations`).to.equal(true);
  });

  it('refuses rotation before bootstrap completes', async () => {
    const e = await instance();
    expect(() => e.rotate()).to.throw(NotBootstrappedError);
    await e.start();
    expect(e.ready).to.equal(false);
    expect(() => e.rotate()).to.throw(NotBootstrappedError);
    await e.stop();
  });

  it('notices a tor killed with SIGKILL and restarts it', async () => {
    const pid = c.pid!;
    const died: Array<{ signal: string | null }> = [];
    c.on('died', (x) => died.push(x));
    const killedAt = Date.now();
    process.kill(pid, 'SIGKILL');
    await waitFor('died event', () => died.length === 1, 5_000);
    expect(died[0]!.signal).to.equal('SIGKILL');
    await c.whenReady(READY_TIMEOUT_MS);
    timings.restartAfterKillToReadyMs = Date.now() - killedAt;
    expect(c.pid).to.not.equal(pid);
    expect(isAlive(pid)).to.equal(false);
    seenPids.add(c.pid!);
    await expectConfirmedExit(c, await whoami(c));
  });

  it('restarts a tor frozen mid-bootstrap (SIGSTOP) as a stall', async () => {
    const f = await instance({ stallTimeoutMs: 4_000, stopGraceMs: 2_000 });
    const stalls: Array<{ percent: number; wipe: boolean }> = [];
    f.on('stalled', (s) => stalls.push(s));
    await f.start();
    const pid = f.pid!;
    process.kill(pid, 'SIGSTOP');
    expect(f.ready).to.equal(false);
    const frozenAt = Date.now();
    await waitFor('stall detected', () => stalls.length === 1, 15_000);
    timings.stallDetectedAfterMs = Date.now() - frozenAt;
    expect(stalls[0]!.wipe).to.equal(false);
    await f.whenReady(READY_TIMEOUT_MS);
    expect(f.pid).to.not.equal(pid);
    expect(isAlive(pid)).to.equal(false);
    seenPids.add(f.pid!);
    await f.stop();
  });

  it('keep-state restart bootstraps faster; a wipe restart brings a new identity (new guard sample)', async () => {
    const stateFile = join(d.dataDirectory, 'state');
    // The guards' identities (their status, up or never-connected, may change meanwhile).
    const guardIds = async (): Promise<string[]> => ((await d.getInfo(['entry-guards'])).get('entry-guards') ?? '').split('\n').map((l) => l.trim().split(' ')[0] ?? '').filter((l) => l !== '');
    const guardsBefore = await guardIds();
    let started = Date.now();
    await d.restart({ wipe: false });
    await d.whenReady(READY_TIMEOUT_MS);
    const keepMs = Date.now() - started;
    const sample1 = guardSample(stateFile); // saved by the first run as it exited
    expect(sample1.length).to.be.greaterThan(0);
    expect(await guardIds()).to.deep.equal(guardsBefore);

    started = Date.now();
    await d.restart({ wipe: true });
    await d.whenReady(READY_TIMEOUT_MS);
    const wipeMs = Date.now() - started;

    started = Date.now();
    await d.restart({ wipe: false });
    await d.whenReady(READY_TIMEOUT_MS);
    const keepMs2 = Date.now() - started;
    const sample3 = guardSample(stateFile); // saved by the wiped run as it exited
    expect(sample3.length).to.be.greaterThan(0);
    expect(sample3).to.not.deep.equal(sample1);

    timings.restartKeepStateToReadyMs = [keepMs, keepMs2];
    timings.restartWipeToReadyMs = wipeMs;
    expect(Math.min(keepMs, keepMs2)).to.be.lessThan(wipeMs);
    seenPids.add(d.pid!);
    await expectConfirmedExit(d, await whoami(d));
  });

  it('with exit pinning, 20 requests in a row leave through one exit', async () => {
    const g = await instance({ pinExitRelay: true });
    await startReady(g);
    await waitFor('pinned exit', () => g.exit.pinnedExit !== '', 10_000);
    const pinned = net.exits.find((e) => e.fingerprint === g.exit.pinnedExit);
    expect(pinned, 'pinned relay is an exit of the network').to.not.equal(undefined);
    const seen = new Set<string>();
    for (let n = 0; n < 20; n++) seen.add(await whoami(g));
    expect([...seen]).to.deep.equal([pinned!.egressAddress]);
    await expectConfirmedExit(g, pinned!.egressAddress);
    expect(g.exit.pinnedExit).to.equal(pinned!.fingerprint);
    // A rotation releases the pin, excludes the old relay and pins the new exit.
    const done = await g.rotate().done;
    expect(done.ok).to.equal(true);
    await waitFor('new pin', () => g.exit.pinnedExit !== '', 10_000);
    expect(g.exit.pinnedExit).to.not.equal(pinned!.fingerprint);
    const next = net.exits.find((e) => e.fingerprint === g.exit.pinnedExit)!;
    for (let n = 0; n < 5; n++) expect(await whoami(g)).to.equal(next.egressAddress);
    await g.stop();
  });

  it('with exit pinning, stops following STREAM events once every circuit leaves through the confirmed exit, and follows them again for a rotation', async () => {
    const g = await instance({ pinExitRelay: true });
    await startReady(g);
    await waitFor('pinned exit', () => g.exit.pinnedExit !== '', 10_000);
    const pinned = net.exits.find((e) => e.fingerprint === g.exit.pinnedExit)!;
    expect(await whoami(g)).to.equal(pinned.egressAddress);
    await expectConfirmedExit(g, pinned.egressAddress);
    // Under traffic, once STREAM_EVENTS_QUIET_MS passed with nothing new to learn from them.
    const deadline = Date.now() + STREAM_EVENTS_QUIET_MS + 30_000;
    while (g.streamEvents.following) {
      if (Date.now() > deadline) throw new Error('STREAM events still followed');
      expect(await whoami(g)).to.equal(pinned.egressAddress);
    }
    // tor itself stopped sending them: 10 requests, not one event.
    const received = g.streamEvents.received;
    for (let n = 0; n < 10; n++) expect(await whoami(g)).to.equal(pinned.egressAddress);
    expect(g.streamEvents.received, 'STREAM events received after unsubscribing').to.equal(received);
    expect(g.exit).to.include({ exitIp: pinned.address, exitConfirmed: true });
    // A rotation needs them again: the new exit is confirmed by the traffic that follows.
    const done = await g.rotate().done;
    expect(done.ok).to.equal(true);
    expect(g.streamEvents.following).to.equal(true);
    await waitFor('new pin', () => g.exit.pinnedExit !== '' && g.exit.pinnedExit !== pinned.fingerprint, 10_000);
    const next = net.exits.find((e) => e.fingerprint === g.exit.pinnedExit)!;
    expect(await whoami(g)).to.equal(next.egressAddress);
    await expectConfirmedExit(g, next.egressAddress);
    await g.stop();
  });

  it('ExitNodes with a country code restricts exits to that country', async () => {
    const country = net.exits[net.exits.length - 1]!.country;
    const allowed = net.exits.filter((e) => e.country === country).map((e) => e.egressAddress);
    const h = await instance({ exitNodes: [`{${country}}`], strictNodes: true });
    await startReady(h);
    for (let n = 0; n < 3; n++) expect(allowed).to.include(await whoami(h));
    const done = await h.rotate().done;
    expect(done.ok).to.equal(true);
    const ip = await whoami(h);
    expect(allowed).to.include(ip);
    await expectConfirmedExit(h, ip);
    expect(h.exit.exitCountry).to.equal(country);
    await h.stop();
  });

  it('a tor whose supervisor is killed exits by itself (no orphans)', async function () {
    this.timeout(OWNER_POLL_GRACE_MS + 30_000);
    const options: TorInstanceOptions = {
      index: nextIndex++,
      dataDir: root,
      socksPort: await freePort(),
      torBinary: net.torBinary,
      defaultsTorrc: net.defaultsTorrc,
      env: { ...process.env, ...net.clientEnvironment } as NodeJS.ProcessEnv,
      extraTorrcLines: net.clientTorrcLines,
    };
    const child = spawn(process.execPath, [ORPHAN_CHILD_JS, JSON.stringify(options)], { stdio: ['ignore', 'pipe', 'ignore'] });
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    const report = await new Promise<OrphanInstanceReport>((resolve, reject) => {
      const lines = createInterface({ input: child.stdout! });
      lines.once('line', (line) => resolve(JSON.parse(line) as OrphanInstanceReport));
      child.once('exit', (code) => reject(new Error(`orphan child exited early (${String(code)})`)));
    });
    expect(report.torPid).to.be.greaterThan(0);
    seenPids.add(report.torPid);
    expect(isAlive(report.torPid)).to.equal(true);
    child.kill('SIGKILL');
    await exited;
    const killedAt = Date.now();
    await waitFor(`tor ${report.torPid} exiting after its supervisor died`, () => !isAlive(report.torPid), OWNER_POLL_GRACE_MS);
    timings.orphanTorExitedAfterMs = Date.now() - killedAt;
  });

  it('leaves no tor process behind after stop()', async () => {
    for (const i of instances) if (i.pid) seenPids.add(i.pid);
    await Promise.all(instances.map((i) => i.stop()));
    expect([...seenPids].filter(isAlive)).to.deep.equal([]);
    expect(processesMentioning(root)).to.deep.equal([]);
    for (const i of instances) expect(i.snapshot()).to.deep.include({ running: false, pid: 0, lifecycle: 'stopped' });
  });
});
