import { expect } from 'chai';
import { chmod, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { TorControlClient } from '../../supervisor/tor/control-client.js';
import { InstanceLayoutError, NotBootstrappedError, PublicNetworkRefusedError } from '../../supervisor/tor/errors.js';
import { EXIT_LIVENESS_LIMITS, type ExitDownVerdict } from '../../supervisor/tor/exit-liveness.js';
import { TorInstance, type ExitState, type TorInstanceOptions } from '../../supervisor/tor/instance.js';
import { quietLogger } from '../support/fakes/quiet-logger.js';
import { isAlive } from '../support/processes/inspection.js';
import { waitFor } from '../support/waiting.js';

const FAKE_TOR_JS = join(dirname(fileURLToPath(import.meta.url)), '..', 'support', 'fakes', 'fake-tor.js');
const PRIVATE_LINES = [
  'TestingTorNetwork 1',
  'UseDefaultFallbackDirs 0',
  'DirAuthority a1 orport=1 no-v2 v3ident=AAAA 127.0.0.1:2 0123456789ABCDEF0123456789ABCDEF01234567',
];
const EXIT_A = 'A'.repeat(40);

describe('tor instance (fake tor binary)', function () {
  this.timeout(30_000);
  let dir: string;
  let torBinary: string;
  const instances: TorInstance[] = [];
  const controls: TorControlClient[] = [];
  let nextPort = 39_100;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tor-inst-'));
    torBinary = join(dir, 'fake-tor');
    await writeFile(torBinary, `#!/bin/sh\nexec "${process.execPath}" "${FAKE_TOR_JS}" "$@"\n`);
    await chmod(torBinary, 0o755);
  });

  afterEach(async () => {
    await Promise.all(controls.splice(0).map((c) => c.close()));
    await Promise.all(instances.splice(0).map((i) => i.stop()));
    await rm(dir, { recursive: true, force: true });
  });

  function instance(fakeLines: string[] = [], extra: Partial<TorInstanceOptions> = {}): TorInstance {
    const i = new TorInstance({
      index: instances.length,
      dataDir: join(dir, 'data'),
      socksPort: nextPort++,
      torBinary,
      extraTorrcLines: [...PRIVATE_LINES, ...fakeLines.map((l) => `# FAKE_TOR ${l}`)],
      stallTimeoutMs: 5_000,
      newnymCooldownMs: 400,
      stopGraceMs: 1_000,
      restartBackoffInitialMs: 50,
      restartBackoffMaxMs: 200,
      commandTimeoutMs: 2_000,
      log: quietLogger(),
      ...extra,
    });
    instances.push(i);
    return i;
  }

  /** A second control connection, as a test harness would use to open fake streams. */
  async function control(i: TorInstance): Promise<TorControlClient> {
    const c = new TorControlClient({ endpoint: i.controlEndpoint, cookieFile: i.cookieFile, log: quietLogger() });
    controls.push(c);
    await c.connect();
    return c;
  }

  async function openStream(i: TorInstance, hold = false): Promise<{ stream: string; circuit: string }> {
    const reply = await (await control(i)).command(hold ? 'FAKE-STREAM-HOLD' : 'FAKE-STREAM');
    const kv = new Map(reply.lines.filter((l) => l.text.includes('=')).map((l) => l.text.split('=') as [string, string]));
    return { stream: kv.get('stream')!, circuit: kv.get('circuit')! };
  }

  it('falls back to TCP listeners on loopback only when DATA_DIR is too deep for socket paths', () => {
    const deep = join(dir, 'd'.repeat(120));
    const log = quietLogger();
    const i = new TorInstance({ index: 0, dataDir: deep, socksPort: 39990, controlPort: 39991, log });
    expect(i.socksAddr).to.equal('127.0.0.1:39990');
    expect(i.socksEndpoint).to.deep.equal({ kind: 'tcp', port: 39990 });
    expect(() => new TorInstance({ index: 0, dataDir: deep, controlPort: 39991, log })).to.throw(InstanceLayoutError);
    const short = new TorInstance({ index: 0, dataDir: join(dir, 'data'), log });
    expect(short.socksEndpoint).to.deep.equal({ kind: 'unix', path: join(dir, 'data', 'tor', '0', 'socks.sock') });
  });

  it('bootstraps to ready, reporting progress, pid, uptime and an inferred exit', async () => {
    const i = instance();
    const lifecycles: string[] = [];
    const percents: number[] = [];
    i.on('state', ({ lifecycle }) => lifecycles.push(lifecycle));
    i.on('bootstrap', ({ percent }) => percents.push(percent));
    expect(i.snapshot()).to.deep.include({ lifecycle: 'idle', running: false, ready: false, pid: 0, bootstrap: 0 });
    await i.start();
    expect(i.running).to.equal(true);
    await i.whenReady(10_000);
    expect(lifecycles).to.deep.equal(['starting', 'bootstrapping', 'ready']);
    expect(percents[percents.length - 1]).to.equal(100);
    expect([...percents].sort((a, b) => a - b)).to.deep.equal(percents);
    await waitFor('inferred exit', () => i.exit.exitIp !== '', 5_000);
    const snap = i.snapshot();
    // The SocksPort is a Unix socket in the instance's private data directory.
    expect(snap).to.deep.include({ id: 0, ready: true, running: true, bootstrap: 100, socksAddr: `unix:${i.dataDirectory}/socks.sock` });
    expect(snap.pid).to.equal(i.pid).and.to.be.greaterThan(0);
    expect(snap.exitConfirmed).to.equal(false);
    expect(snap.exitIp).to.match(/^127\.0\.0\.1[123]$/);
    expect(snap.exitCountry).to.be.oneOf(['de', 'nl', 'us']);
    expect(snap.exitNickname).to.match(/^exit[ABC]$/);
    expect(snap.retiredExitIp).to.equal('');
    const torrc = await readFile(i.torrcPath, 'utf8');
    expect(torrc).to.include(`__OwningControllerProcess ${process.pid}`);
    expect(torrc).to.include(`ControlPort unix:"${i.dataDirectory}/control.sock"`);
    expect(torrc).to.include(`SocksPort unix:"${i.dataDirectory}/socks.sock"`);
    expect((await stat(i.dataDirectory)).mode & 0o777).to.equal(0o700);
  });

  it('refuses a torrc without private-network markers unless the public network is allowed', async () => {
    const i = instance([], { extraTorrcLines: [] });
    let error: unknown;
    await i.start().catch((e: unknown) => (error = e));
    expect(error).to.be.instanceOf(PublicNetworkRefusedError);
    expect(i.running).to.equal(false);
    expect(i.lifecycle).to.equal('stopped');
  });

  it('confirms the exit from the circuit that carried a stream', async () => {
    const i = instance();
    await i.start();
    await i.whenReady(10_000);
    const { circuit } = await openStream(i);
    await waitFor('confirmed exit', () => i.exit.exitConfirmed, 5_000);
    const circuits = (await i.getInfo(['circuit-status'])).get('circuit-status') ?? '';
    const line = circuits.split('\n').find((l) => l.startsWith(`${circuit} `))!;
    const exitFp = /\$([0-9A-F]{40})~exit[ABC] /.exec(line)![1];
    expect(i.exit.exitFingerprint).to.equal(exitFp);
  });

  it('refuses rotate() before bootstrap with NotBootstrappedError', async () => {
    const i = instance(['step-ms=200']);
    expect(() => i.rotate()).to.throw(NotBootstrappedError);
    await i.start();
    expect(() => i.rotate()).to.throw(NotBootstrappedError);
  });

  it('rotates: retired exit shown meanwhile, idle old circuits closed, streams kept, new exit known', async () => {
    const i = instance();
    await i.start();
    await i.whenReady(10_000);
    const held = await openStream(i, true);
    await waitFor('confirmed exit', () => i.exit.exitConfirmed, 5_000);
    const before = i.exit;
    const changes: ExitState[] = [];
    i.on('exit-changed', (e) => changes.push(e));
    const ticket = i.rotate();
    // Synchronously out of service, with the retired exit named.
    expect(i.rotating).to.equal(true);
    expect(i.exit).to.deep.include({ exitIp: '', rotating: true, retiredExitIp: before.exitIp });
    expect(i.rotate()).to.equal(ticket);
    const sent = await ticket.newnymSent;
    expect(sent.ok).to.equal(true);
    const done = await ticket.done;
    expect(done.ok).to.equal(true);
    if (!done.ok) return;
    expect(done.exit.exitIp).to.not.equal('');
    expect(i.rotating).to.equal(false);
    expect(i.exit.retiredExitIp).to.equal('');
    expect(changes[0]).to.deep.include({ exitIp: '', retiredExitIp: before.exitIp, rotating: true });
    for (const c of changes) if (c.exitIp !== '') expect(c.retiredExitIp).to.equal('');
    // The circuit with the open stream survived; idle old ones were closed.
    const circuits = (await i.getInfo(['circuit-status'])).get('circuit-status') ?? '';
    const ids = circuits.split('\n').filter(Boolean).map((l) => l.split(' ')[0]);
    expect(ids).to.include(held.circuit);
    expect(ids.every((id) => id === held.circuit || Number(id) > Number(held.circuit))).to.equal(true);
  });

  it('waits out the NEWNYM cooldown for a second rotation', async () => {
    const i = instance([], { newnymCooldownMs: 800 });
    await i.start();
    await i.whenReady(10_000);
    const first = await i.rotate().done;
    expect(first.ok).to.equal(true);
    const t0 = Date.now();
    const second = i.rotate();
    expect(i.snapshot().newnymCooldownMs).to.be.greaterThan(0);
    const sent = await second.newnymSent;
    expect(sent.ok && sent.waitedMs).to.be.greaterThan(300);
    expect(Date.now() - t0).to.be.greaterThan(300);
    expect((await second.done).ok).to.equal(true);
  });

  it('restarts a tor that dies unexpectedly (kill -9), with backoff', async () => {
    const i = instance();
    await i.start();
    await i.whenReady(10_000);
    const pid = i.pid!;
    const died: Array<{ signal: string | null; restartInMs: number }> = [];
    i.on('died', (d) => died.push(d));
    process.kill(pid, 'SIGKILL');
    await waitFor('died event', () => died.length === 1, 5_000);
    expect(died[0]).to.deep.include({ signal: 'SIGKILL', restartInMs: 50 });
    expect(i.ready).to.equal(false);
    expect(i.exit.exitIp).to.equal('');
    await waitFor('ready again', () => i.ready, 10_000);
    expect(i.pid).to.not.equal(pid);
    expect(i.restarts).to.equal(1);
  });

  it('backs off on repeated crashes and keeps trying', async () => {
    const i = instance(['crash-at=50', 'step-ms=5']);
    const died: number[] = [];
    i.on('died', (d) => died.push(d.restartInMs));
    await i.start();
    await waitFor('four deaths', () => died.length >= 4, 10_000);
    expect(died.slice(0, 4)).to.deep.equal([50, 100, 200, 200]);
    await i.stop();
    expect(i.lifecycle).to.equal('stopped');
  });

  it('restarts a stalled bootstrap: first keeping state, then wiping it', async () => {
    const i = instance(['stall-at=30', 'step-ms=5'], { stallTimeoutMs: 300 });
    const stalls: Array<{ percent: number; wipe: boolean }> = [];
    i.on('stalled', (s) => stalls.push(s));
    await i.start();
    await writeFile(join(i.dataDirectory, 'marker'), 'state');
    const pid1 = i.pid;
    await waitFor('first stall', () => stalls.length === 1, 5_000);
    expect(stalls[0]).to.deep.equal({ percent: 30, wipe: false });
    await waitFor('restarted', () => i.running && i.pid !== pid1 && i.bootstrap > 0, 5_000);
    expect(await readFile(join(i.dataDirectory, 'marker'), 'utf8')).to.equal('state');
    const pid2 = i.pid;
    await waitFor('second stall', () => stalls.length === 2, 5_000);
    expect(stalls[1]!.wipe).to.equal(true);
    await waitFor('restarted again', () => i.running && i.pid !== pid2 && i.bootstrap > 0, 5_000);
    let missing = false;
    await readFile(join(i.dataDirectory, 'marker')).catch(() => (missing = true));
    expect(missing).to.equal(true);
    // Two restarts, one per stall; on a loaded machine a third stall may already have come (its
    // restart is queued behind the stall event, so stop() may cancel it).
    await i.stop();
    expect(i.restarts).to.be.within(2, Math.max(2, stalls.length));
  });

  it('treats a frozen (SIGSTOPped) tor as a stall and replaces it', async () => {
    const i = instance(['step-ms=100'], { stallTimeoutMs: 400, stopGraceMs: 300 });
    const stalls: boolean[] = [];
    i.on('stalled', (s) => stalls.push(s.wipe));
    await i.start();
    const pid = i.pid!;
    await waitFor('some progress', () => i.bootstrap > 0, 5_000);
    process.kill(pid, 'SIGSTOP');
    await waitFor('stall', () => stalls.length === 1, 5_000);
    await waitFor('ready after restart', () => i.ready, 10_000);
    expect(i.pid).to.not.equal(pid);
    expect(isAlive(pid)).to.equal(false);
  });

  it('marks a ready tor that stops answering (SIGSTOP) unresponsive, and responsive again when it resumes', async () => {
    const i = instance([], { livenessIntervalMs: 100, livenessTimeoutMs: 200, unresponsiveRestartMs: 30_000 });
    const seen: string[] = [];
    i.on('unresponsive', () => seen.push('unresponsive'));
    i.on('responsive', () => seen.push('responsive'));
    await i.start();
    await i.whenReady(10_000);
    const pid = i.pid!;
    await new Promise((r) => setTimeout(r, 400));
    expect(i.responsive, 'a tor that answers stays responsive').to.equal(true);
    expect(seen).to.deep.equal([]);
    process.kill(pid, 'SIGSTOP');
    try {
      await waitFor('unresponsive', () => !i.responsive, 5_000);
      expect(i.ready, 'still bootstrapped: only out of service').to.equal(true);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    await waitFor('responsive again', () => i.responsive, 10_000);
    expect(seen).to.deep.equal(['unresponsive', 'responsive']);
    expect(i.pid, 'the same process, not restarted').to.equal(pid);
  });

  it('restarts a tor that stays unresponsive, keeping its state', async () => {
    const i = instance([], { livenessIntervalMs: 100, livenessTimeoutMs: 200, unresponsiveRestartMs: 800, stopGraceMs: 300 });
    await i.start();
    await i.whenReady(10_000);
    await writeFile(join(i.dataDirectory, 'marker'), 'state');
    const pid = i.pid!;
    process.kill(pid, 'SIGSTOP');
    await waitFor('unresponsive', () => !i.responsive, 5_000);
    await waitFor('ready again with a new process', () => i.ready && i.pid !== undefined && i.pid !== pid, 15_000);
    expect(i.responsive).to.equal(true);
    expect(isAlive(pid), 'the frozen process is gone (SIGKILL ends a stopped process)').to.equal(false);
    expect(await readFile(join(i.dataDirectory, 'marker'), 'utf8')).to.equal('state');
    expect(i.restarts).to.equal(1);
  });

  it('restart keeps or wipes the data directory and always waits for the old process to exit', async () => {
    const i = instance();
    await i.start();
    await i.whenReady(10_000);
    await writeFile(join(i.dataDirectory, 'marker'), 'state');
    const pid1 = i.pid!;
    await i.restart({ wipe: false });
    expect(isAlive(pid1)).to.equal(false);
    expect(await readFile(join(i.dataDirectory, 'marker'), 'utf8')).to.equal('state');
    await i.whenReady(10_000);
    const pid2 = i.pid!;
    await i.restart({ wipe: true });
    expect(isAlive(pid2)).to.equal(false);
    let missing = false;
    await readFile(join(i.dataDirectory, 'marker')).catch(() => (missing = true));
    expect(missing).to.equal(true);
    await i.whenReady(10_000);
    expect(i.restarts).to.equal(2);
  });

  it('stop() SIGKILLs a tor that ignores SIGTERM and ends a pending rotation', async () => {
    const i = instance(['ignore-sigterm=1'], { stopGraceMs: 300, newnymCooldownMs: 60_000 });
    await i.start();
    await i.whenReady(10_000);
    await i.rotate().done;
    const pending = i.rotate(); // waits for a 60 s cooldown
    const pid = i.pid!;
    await i.stop();
    expect(isAlive(pid)).to.equal(false);
    expect(await pending.done).to.deep.equal({ ok: false, reason: 'stopped' });
    expect(await pending.newnymSent).to.deep.equal({ ok: false, reason: 'stopped' });
    expect(i.snapshot()).to.deep.include({ lifecycle: 'stopped', running: false, ready: false, pid: 0, exitIp: '' });
    await i.stop(); // idempotent
  });

  it('pins the exit relay and moves the pin on rotation, excluding the old relay meanwhile', async () => {
    const i = instance([], { pinExitRelay: true });
    await i.start();
    await i.whenReady(10_000);
    await waitFor('pin', () => i.exit.pinnedExit !== '', 5_000);
    const pinned = i.exit.pinnedExit;
    const ctl = await control(i);
    expect((await ctl.getConf(['ExitNodes', 'StrictNodes'])).get('ExitNodes')).to.equal(`$${pinned}`);
    for (let n = 0; n < 5; n++) await openStream(i);
    await waitFor('confirmed', () => i.exit.exitConfirmed, 5_000);
    expect(i.exit.exitFingerprint).to.equal(pinned);
    const done = await i.rotate().done;
    expect(done.ok).to.equal(true);
    await waitFor('new pin', () => i.exit.pinnedExit !== '', 5_000);
    expect(i.exit.pinnedExit).to.not.equal(pinned);
    const conf = await ctl.getConf(['ExitNodes', 'ExcludeExitNodes', 'StrictNodes']);
    expect(conf.get('ExitNodes')).to.equal(`$${i.exit.pinnedExit}`);
    expect(conf.get('ExcludeExitNodes')).to.equal(undefined);
    expect(conf.get('StrictNodes')).to.equal('1');
  });

  it('rotates to an assigned exit by pinning it (no NEWNYM), and reports an exit through which no circuit is built', async () => {
    const EXIT_B = 'B'.repeat(40);
    const i = instance(['exits=' + `${EXIT_A}:127.0.0.11:de:exitA,${EXIT_B}:127.0.0.12:nl:exitB`], { rotationTimeoutMs: 500 });
    await i.start();
    await i.whenReady(10_000);
    const target = i.exit.exitFingerprint === EXIT_B ? EXIT_A : EXIT_B;
    const ticket = i.rotate(target);
    expect(i.exit.rotating, 'out of service at once').to.equal(true);
    const done = await ticket.done;
    expect(done.ok).to.equal(true);
    expect(done.ok && done.exit.exitFingerprint).to.equal(target);
    expect(i.exit).to.deep.include({ pinnedExit: target, exitFingerprint: target, rotating: false });
    const ctl = await control(i);
    expect((await ctl.getConf(['ExitNodes'])).get('ExitNodes')).to.equal(`$${target}`);
    // A relay tor cannot build a circuit through: reported once the rotation timeout has passed.
    const ghost = 'C'.repeat(40);
    const unreachable = new Promise<{ fingerprint: string }>((resolve) => i.once('exit-unreachable', resolve));
    void i.rotate(ghost).done;
    expect(await unreachable).to.deep.equal({ fingerprint: ghost });
  });

  it('finds a killed pinned exit down from its circuits and its own probes, once, with the evidence', async () => {
    const EXIT_B = 'B'.repeat(40);
    const i = instance(['exits=' + `${EXIT_A}:127.0.0.11:de:exitA,${EXIT_B}:127.0.0.12:nl:exitB`]);
    await i.start();
    await i.whenReady(10_000);
    expect((await i.rotate(EXIT_A, { untilCircuit: true }).done).ok).to.equal(true);
    const verdicts: ExitDownVerdict[] = [];
    i.on('exit-down', (v) => verdicts.push(v));
    const started = Date.now();
    await (await control(i)).command(`FAKE-KILL-EXIT ${EXIT_A}`);
    await waitFor('the pinned exit found down', () => verdicts.length > 0, 5_000);
    const tookMs = Date.now() - started;
    const [verdict] = verdicts;
    expect(verdict?.fingerprint).to.equal(EXIT_A);
    expect(verdict?.evidence.length).to.be.at.least(EXIT_LIVENESS_LIMITS.evidence);
    expect(new Set(verdict?.evidence.map((e) => e.middle)).size).to.be.at.least(EXIT_LIVENESS_LIMITS.middles);
    expect(verdict?.evidence.some((e) => e.kind === 'extend_failed'), 'the probes failed at the exit').to.equal(true);
    // Nothing waited for a stall or a rotation timeout: the failures came back at once.
    expect(tookMs).to.be.below(EXIT_LIVENESS_LIMITS.extendStallMs);
    await new Promise((r) => setTimeout(r, 200));
    expect(verdicts, 'said once').to.have.length(1);
  });

  it('ends a rotation to a dead exit with exit-down, told first, instead of waiting for the rotation timeout', async () => {
    const EXIT_B = 'B'.repeat(40);
    const i = instance(['exits=' + `${EXIT_A}:127.0.0.11:de:exitA,${EXIT_B}:127.0.0.12:nl:exitB`], { rotationTimeoutMs: 20_000 });
    await i.start();
    await i.whenReady(10_000);
    await (await control(i)).command(`FAKE-KILL-EXIT ${EXIT_B}`);
    const order: string[] = [];
    i.on('exit-down', () => order.push('exit-down'));
    const outcome = await i.rotate(EXIT_B, { untilCircuit: true }).done;
    order.push('rotation ended');
    expect(outcome).to.deep.include({ ok: false, reason: 'exit-down' });
    expect(order).to.deep.equal(['exit-down', 'rotation ended']);
  });

  it('keeps a pin across a keep-state restart and drops it on a wipe', async () => {
    const i = instance(['exits=' + `${EXIT_A}:127.0.0.11:de:exitA,${'B'.repeat(40)}:127.0.0.12:nl:exitB`], { pinExitRelay: true });
    await i.start();
    await i.whenReady(10_000);
    await waitFor('pin', () => i.exit.pinnedExit !== '', 5_000);
    const pinned = i.exit.pinnedExit;
    await i.restart({ wipe: false });
    await i.whenReady(10_000);
    await waitFor('same pin after keep-state restart', () => i.exit.pinnedExit === pinned, 5_000);
    await i.restart({ wipe: true });
    expect(i.exit.pinnedExit).to.equal('');
  });

  it('falls back to a TCP control port when the socket path would be too long', () => {
    const longDir = join(dir, 'x'.repeat(100));
    expect(() => instance([], { dataDir: longDir })).to.throw(InstanceLayoutError);
    instances.pop();
    const i = instance([], { dataDir: longDir, controlPort: 39_999 });
    expect(i.controlEndpoint).to.deep.equal({ kind: 'tcp', port: 39_999 });
  });

  it('leaves no process behind after stop()', async () => {
    const many = [instance(), instance(), instance()];
    await Promise.all(many.map((i) => i.start()));
    await Promise.all(many.map((i) => i.whenReady(10_000)));
    const pids = many.map((i) => i.pid!);
    await Promise.all(many.map((i) => i.stop()));
    expect(pids.filter(isAlive)).to.deep.equal([]);
  });
});
