import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { endLeftoverTors, owningPidOf, processesRunning } from '../../supervisor/tor/leftover-tor.js';
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
  let torrc: string;
  const children: ChildProcess[] = [];

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'leftover-tor-'));
    torrc = join(dir, 'torrc');
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

  it('ends a tor that runs this torrc for an owner that is gone, and says so', async () => {
    const pid = await running(start(torrc));
    const owner = await deadPid();
    await writeFile(torrc, `SocksPort 0\n__OwningControllerProcess ${owner}\n`);
    const { logger, lines } = capturingLogger();
    const found = await endLeftoverTors(torrc, process.pid, logger);
    expect(found).to.deep.equal([{ pid, owner }]);
    expect(await waitAllGone([pid], 2_000)).to.deep.equal([]);
    const line = lines.find((l) => String(l.message).startsWith('ended a tor left running'));
    expect(line, JSON.stringify(lines)).to.include({ level: 'warn', owner });
    expect(line?.ended).to.deep.equal([pid]);
  });

  it('SIGKILLs one that does not leave on SIGTERM (tor hung in its own exit) after the grace', async () => {
    const pid = await running(start(torrc, true));
    await writeFile(torrc, `__OwningControllerProcess ${await deadPid()}\n`);
    const { logger, lines } = capturingLogger();
    const t0 = performance.now();
    await endLeftoverTors(torrc, process.pid, logger, 300);
    expect(performance.now() - t0, 'waited for the grace first').to.be.at.least(250);
    expect(isAlive(pid)).to.equal(false);
    expect(lines.find((l) => String(l.message).startsWith('ended a tor'))?.stillAlive).to.deep.equal([]);
  });

  it('leaves a tor alone whose owner lives (another exitpool, or a reused PID), and warns', async () => {
    const pid = await running(start(torrc));
    const owner = start(join(dir, 'someone-else')).pid as number;
    await writeFile(torrc, `__OwningControllerProcess ${owner}\n`);
    const { logger, lines } = capturingLogger();
    expect(await endLeftoverTors(torrc, process.pid, logger, 100)).to.deep.equal([{ pid, owner }]);
    expect(isAlive(pid)).to.equal(true);
    expect(lines.some((l) => l.level === 'warn' && String(l.message).includes('left alone'))).to.equal(true);
  });

  it('leaves it alone when the torrc names no owner: missing, without the line, or with a malformed one', async () => {
    const pid = await running(start(torrc));
    const { logger } = capturingLogger();
    for (const text of [undefined, 'SocksPort 0\n', '__OwningControllerProcess 12abc\n', '__OwningControllerProcess\n', '# __OwningControllerProcess 1\n']) {
      if (text !== undefined) await writeFile(torrc, text);
      expect(await owningPidOf(torrc), String(text)).to.equal(undefined);
      expect(await endLeftoverTors(torrc, process.pid, logger, 100)).to.have.length(1);
      expect(isAlive(pid), String(text)).to.equal(true);
    }
  });

  it('never takes another user’s process for a leftover, whatever its command line (the service may run as root)', async () => {
    // sh stays the process (not exec'd into sleep) because more follows the sleep.
    const foreign = spawn('/bin/sh', ['-c', 'sleep 30; :', '-f', torrc], { stdio: 'ignore', uid: 65534, gid: 65534 });
    children.push(foreign);
    for (let i = 0; i < 100 && !(await commandLineOf(foreign.pid as number)).includes(torrc); i++) await new Promise((r) => setTimeout(r, 20));
    expect(await commandLineOf(foreign.pid as number), 'the foreign process runs the torrc').to.include(torrc);
    await writeFile(torrc, `__OwningControllerProcess ${await deadPid()}\n`);
    const { logger } = capturingLogger();
    expect(processesRunning(torrc)).to.deep.equal([]);
    expect(await endLeftoverTors(torrc, process.pid, logger)).to.deep.equal([]);
    expect(isAlive(foreign.pid as number)).to.equal(true);
  });

  it('never signals itself, and finds only processes that run exactly this torrc', async () => {
    const other = await running(start(`${torrc}.other`));
    const prefix = await running(start(join(dir, 'tor')));
    expect(processesRunning(torrc)).to.deep.equal([]);
    await writeFile(torrc, `__OwningControllerProcess ${await deadPid()}\n`);
    const { logger } = capturingLogger();
    expect(await endLeftoverTors(torrc, process.pid, logger)).to.deep.equal([]);
    expect(isAlive(other) && isAlive(prefix)).to.equal(true);
    expect(processesRunning(`${torrc}.other`)).to.deep.equal([other]);
  });
});
