import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { endLeftoverTors, owningPidOf, torsRunningUnder } from '../../supervisor/tor/leftover-tor.js';
import { capturingLogger } from '../support/fakes/proxy-parts.js';
import { isAlive, waitAllGone } from '../support/processes/inspection.js';

/** A stand-in for a tor left running: a process whose command line runs `-f <torrc>`. */
function fakeTor(torrc: string, ignoreTerm = false): ChildProcess {
  const code = `${ignoreTerm ? "process.on('SIGTERM', () => {});" : ''} setInterval(() => {}, 1000); process.stdout.write('ready\\n');`;
  return spawn(process.execPath, ['-e', code, '--', '-f', torrc], { stdio: ['ignore', 'pipe', 'ignore'] });
}

/** The PID of a process that has exited: an owner that is gone. */
async function deadPid(): Promise<number> {
  const p = spawn(process.execPath, ['-e', '0'], { stdio: 'ignore' });
  await new Promise((resolve) => p.once('exit', resolve));
  return p.pid as number;
}

/** Waits until the fake tor runs its code (its signal handler installed, its command line its own). */
async function running(p: ChildProcess): Promise<number> {
  if (p.pid === undefined || !p.stdout) throw new Error('spawn failed');
  await new Promise<void>((resolve, reject) => {
    p.stdout?.once('data', () => resolve());
    p.once('exit', () => reject(new Error('the fake tor exited')));
  });
  return p.pid;
}

async function commandLineOf(pid: number): Promise<string> {
  return (await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')).replaceAll('\0', ' ');
}

describe('leftover tors of an earlier supervisor (fake tors)', function () {
  this.timeout(20_000);
  let dir: string;
  /** What torRootOf(DATA_DIR) would be. */
  let torRoot: string;
  let torrc: string;
  const children: ChildProcess[] = [];

  /** An instance's torrc under the root, naming `owner` (or the text given). */
  async function instanceTorrc(index: number, owner: number | string): Promise<string> {
    const file = join(torRoot, String(index), 'torrc');
    await mkdir(join(torRoot, String(index)), { recursive: true });
    await writeFile(file, typeof owner === 'number' ? `SocksPort 0\n__OwningControllerProcess ${owner}\n` : owner);
    return file;
  }

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'leftover-tor-'));
    torRoot = join(dir, 'tor');
    torrc = join(torRoot, '0', 'torrc');
  });

  afterEach(async () => {
    for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await rm(dir, { recursive: true, force: true });
  });

  function start(path: string, ignoreTerm = false): ChildProcess {
    const c = fakeTor(path, ignoreTerm);
    children.push(c);
    return c;
  }

  it('ends, in one pass, every tor that runs an instance torrc of the DATA_DIR for an owner that is gone, and says so', async () => {
    const owner = await deadPid();
    const torrcs = [await instanceTorrc(0, owner), await instanceTorrc(3, owner)];
    const pids = [await running(start(torrcs[0] as string)), await running(start(torrcs[1] as string))];
    const { logger, lines } = capturingLogger();
    const found = await endLeftoverTors(torRoot, process.pid, logger);
    expect(found.map((t) => t.pid).sort()).to.deep.equal([...pids].sort());
    expect(found.every((t) => t.owner === owner)).to.equal(true);
    expect(await waitAllGone(pids, 2_000)).to.deep.equal([]);
    const ended = lines.filter((l) => String(l.message).startsWith('ended tors left running'));
    expect(ended, JSON.stringify(lines)).to.have.length(1);
    expect((ended[0]?.ended as number[]).sort()).to.deep.equal([...pids].sort());
  });

  it('SIGKILLs one that does not leave on SIGTERM (tor hung in its own exit) after the grace', async () => {
    const pid = await running(start(await instanceTorrc(0, await deadPid()), true));
    const { logger, lines } = capturingLogger();
    const t0 = performance.now();
    await endLeftoverTors(torRoot, process.pid, logger, 300);
    expect(performance.now() - t0, 'waited for the grace first').to.be.at.least(250);
    expect(isAlive(pid)).to.equal(false);
    expect(lines.find((l) => String(l.message).startsWith('ended tors'))?.stillAlive).to.deep.equal([]);
  });

  it('leaves a tor alone whose owner lives (another exitpool, or a reused PID), and warns', async () => {
    const owner = start(join(dir, 'someone-else')).pid as number;
    const pid = await running(start(await instanceTorrc(0, owner)));
    const { logger, lines } = capturingLogger();
    expect(await endLeftoverTors(torRoot, process.pid, logger, 100)).to.deep.equal([{ pid, torrc, owner }]);
    expect(isAlive(pid)).to.equal(true);
    expect(lines.some((l) => l.level === 'warn' && String(l.message).includes('left alone'))).to.equal(true);
  });

  it('leaves it alone when the torrc names no owner: missing, without the line, or with a malformed one', async () => {
    const pid = await running(start(torrc));
    const { logger } = capturingLogger();
    for (const text of [undefined, 'SocksPort 0\n', '__OwningControllerProcess 12abc\n', '__OwningControllerProcess\n', '# __OwningControllerProcess 1\n']) {
      if (text !== undefined) await instanceTorrc(0, text);
      expect(await owningPidOf(torrc), String(text)).to.equal(undefined);
      expect(await endLeftoverTors(torRoot, process.pid, logger, 100)).to.have.length(1);
      expect(isAlive(pid), String(text)).to.equal(true);
    }
  });

  it('never takes another user’s process for a leftover, whatever its command line (the service may run as root)', async () => {
    await instanceTorrc(0, await deadPid());
    // sh stays the process (not exec'd into sleep) because more follows the sleep.
    const foreign = spawn('/bin/sh', ['-c', 'sleep 30; :', '-f', torrc], { stdio: 'ignore', uid: 65534, gid: 65534 });
    children.push(foreign);
    for (let i = 0; i < 100 && !(await commandLineOf(foreign.pid as number)).includes(torrc); i++) await new Promise((r) => setTimeout(r, 20));
    expect(await commandLineOf(foreign.pid as number), 'the foreign process runs the torrc').to.include(torrc);
    const { logger } = capturingLogger();
    expect(torsRunningUnder(torRoot).size).to.equal(0);
    expect(await endLeftoverTors(torRoot, process.pid, logger)).to.deep.equal([]);
    expect(isAlive(foreign.pid as number)).to.equal(true);
  });

  it('never signals itself, and finds only processes that run exactly <root>/<i>/torrc', async () => {
    const owner = await deadPid();
    await instanceTorrc(0, owner);
    const others = [`${torrc}.other`, join(torRoot, 'torrc'), join(torRoot, '0', 'sub', 'torrc'), join(dir, 'elsewhere', '0', 'torrc')];
    const pids = await Promise.all(others.map((p) => running(start(p))));
    const { logger } = capturingLogger();
    expect(torsRunningUnder(torRoot).size).to.equal(0);
    expect(await endLeftoverTors(torRoot, process.pid, logger)).to.deep.equal([]);
    expect(pids.every(isAlive)).to.equal(true);
    expect([...torsRunningUnder(join(dir, 'elsewhere')).keys()]).to.deep.equal([pids[3]]);
  });
});
