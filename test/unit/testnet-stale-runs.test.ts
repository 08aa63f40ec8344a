import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import winston from 'winston';
import { PortBlockUnavailableError, WorkDirInUseError } from '../../internal/testnet/errors.js';
import { reservePortBlock } from '../../internal/testnet/port-block.js';
import { isProcessAlive } from '../../shared/process/foreign-processes.js';
import { findExecutable } from '../../internal/testnet/required-tools.js';
import { isTorOfRun, OWNER_FILE, reapStaleRuns, writeOwnerFile } from '../../internal/testnet/stale-runs.js';
import { startTestnet } from '../../internal/testnet/testnet.js';
import { PORT_BLOCK_SIZE } from '../../internal/testnet/topology.js';

const silent = winston.createLogger({ silent: true });

/** A PID that belonged to a process which has exited (so an owner file naming it is stale). */
async function deadPid(): Promise<number> {
  const child = spawn('true');
  const pid = child.pid ?? 0;
  await new Promise((resolve) => child.once('exit', resolve));
  return pid;
}

/** A real tor that opens no socket at all (DisableNetwork 1), with its torrc inside dir. */
async function startIsolatedTor(dir: string): Promise<ChildProcess> {
  mkdirSync(path.join(dir, 'data'), { recursive: true, mode: 0o700 });
  const torrc = path.join(dir, 'torrc');
  const placeholder = 'F'.repeat(40);
  writeFileSync(
    torrc,
    [
      'TestingTorNetwork 1',
      'UseDefaultFallbackDirs 0',
      `DirAuthority placeholder orport=1 no-v2 v3ident=${placeholder} 127.0.0.1:1 ${placeholder}`,
      'DisableNetwork 1',
      'SocksPort 0',
      `DataDirectory ${path.join(dir, 'data')}`,
      `PidFile ${path.join(dir, 'tor.pid')}`,
      `__OwningControllerProcess ${process.pid}`,
      'Log err stderr',
    ].join('\n') + '\n',
  );
  writeFileSync(path.join(dir, 'torrc-defaults'), '');
  const tor = spawn(findExecutable('tor'), ['--defaults-torrc', path.join(dir, 'torrc-defaults'), '-f', torrc], { stdio: 'ignore' });
  const deadline = Date.now() + 15_000;
  while (!existsSync(path.join(dir, 'tor.pid'))) {
    if (Date.now() > deadline) throw new Error('isolated tor did not start');
    await delay(50);
  }
  return tor;
}

describe('testnet stale-run reaping and port blocks', function () {
  this.timeout(60_000);
  let root: string;
  const children: ChildProcess[] = [];

  beforeEach(() => {
    root = mkdtempSync(path.join(os.tmpdir(), 'exitpool-testnet-reap-'));
  });

  afterEach(() => {
    for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    rmSync(root, { recursive: true, force: true });
  });

  it("kills the tors of a run whose owner is dead and removes the run, but never a PID that is not that run's tor", async () => {
    const run = path.join(root, 'run-stale');
    mkdirSync(run);
    writeFileSync(path.join(run, OWNER_FILE), JSON.stringify({ pid: await deadPid(), createdAt: 'x' }));
    const tor = await startIsolatedTor(path.join(run, 'tnexit0'));
    children.push(tor);
    // A reused PID: a pid file naming a process that is not a tor of this run.
    const decoy = spawn('sleep', ['60'], { stdio: 'ignore' });
    children.push(decoy);
    mkdirSync(path.join(run, 'tnrelay0'));
    writeFileSync(path.join(run, 'tnrelay0', 'tor.pid'), `${String(decoy.pid)}\n`);

    const torPid = Number(readFileSync(path.join(run, 'tnexit0', 'tor.pid'), 'utf8'));
    expect(isTorOfRun(torPid, run)).to.equal(true);
    expect(isTorOfRun(decoy.pid ?? 0, run)).to.equal(false);
    expect(isTorOfRun(torPid, path.join(root, 'other-run'))).to.equal(false);

    const result = await reapStaleRuns(root, silent);
    expect(result).to.deep.equal({ runs: 1, killed: 1 });
    expect(isProcessAlive(torPid)).to.equal(false);
    expect(isProcessAlive(decoy.pid ?? 0), 'unrelated process untouched').to.equal(true);
    expect(existsSync(run)).to.equal(false);
  });

  it('keeps runs whose owner is alive (concurrent test runs) and directories that are not runs', async () => {
    const live = path.join(root, 'run-live');
    mkdirSync(live);
    writeOwnerFile(live);
    const foreign = path.join(root, 'not-a-run');
    mkdirSync(foreign);
    expect(await reapStaleRuns(root, silent)).to.deep.equal({ runs: 0, killed: 0 });
    expect(existsSync(live)).to.equal(true);
    expect(existsSync(foreign)).to.equal(true);
  });

  it('refuses a given work dir that is a live run or a non-empty foreign directory', async () => {
    const live = path.join(root, 'run-live');
    mkdirSync(live);
    writeOwnerFile(live);
    const err = await startTestnet({ workDir: live, log: silent }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).to.be.instanceOf(WorkDirInUseError);
    const foreign = path.join(root, 'foreign');
    mkdirSync(foreign);
    writeFileSync(path.join(foreign, 'precious.txt'), 'keep me');
    const err2 = await startTestnet({ workDir: foreign, log: silent }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err2).to.be.instanceOf(WorkDirInUseError);
    expect(readFileSync(path.join(foreign, 'precious.txt'), 'utf8')).to.equal('keep me');
  });

  it('reserves a port block once: an exact request for a held block fails, an automatic one moves on', async () => {
    // A block far from the default so a concurrent test network is not disturbed.
    const base = 61000;
    const endpointsFor = (b: number) => [{ address: '127.0.0.1', port: b, protocol: 'tcp' as const }];
    const first = await reservePortBlock({ basePort: base, exact: true, span: 30, endpointsFor });
    try {
      const err = await reservePortBlock({ basePort: base, exact: true, span: 30, endpointsFor }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).to.be.instanceOf(PortBlockUnavailableError);
      const moved = await reservePortBlock({ basePort: base, exact: false, span: 30, endpointsFor });
      expect(moved.basePort).to.equal(base + PORT_BLOCK_SIZE);
      moved.release();
    } finally {
      first.release();
    }
    const again = await reservePortBlock({ basePort: base, exact: true, span: 30, endpointsFor });
    again.release();
  });

  it('skips a block whose ports are taken by someone else', async () => {
    const { createServer } = await import('node:net');
    const base = 61200;
    const squatter = createServer();
    await new Promise<void>((resolve) => squatter.listen(base + 5, '127.0.0.1', () => resolve()));
    try {
      const endpointsFor = (b: number) => [{ address: '127.0.0.1', port: b + 5, protocol: 'tcp' as const }];
      const block = await reservePortBlock({ basePort: base, exact: false, span: 30, endpointsFor });
      expect(block.basePort).to.equal(base + PORT_BLOCK_SIZE);
      block.release();
    } finally {
      await new Promise<void>((resolve) => squatter.close(() => resolve()));
    }
  });
});
