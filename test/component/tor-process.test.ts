import { expect } from 'chai';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TorProcess } from '../../supervisor/tor/tor-process.js';
import { isAlive } from '../support/processes/inspection.js';

/** A fake "tor": a shell script that prints its arguments and then behaves as told. */
async function script(dir: string, name: string, body: string): Promise<string> {
  const path = join(dir, name);
  await writeFile(path, `#!/bin/sh\necho "args: $*"\necho "to stderr" >&2\n${body}\n`);
  await chmod(path, 0o755);
  return path;
}

describe('tor process (fake binaries)', function () {
  this.timeout(20_000);
  let dir: string;
  const started: TorProcess[] = [];

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tor-proc-'));
  });

  afterEach(async () => {
    for (const p of started.splice(0)) await p.stop(100);
    await rm(dir, { recursive: true, force: true });
  });

  function proc(torBinary: string, defaultsTorrc?: string): TorProcess {
    const p = new TorProcess({ torBinary, torrcPath: '/path/to/torrc', ...(defaultsTorrc ? { defaultsTorrc } : {}) });
    started.push(p);
    return p;
  }

  it('spawns `tor -f <torrc>`, delivers stdout and stderr lines and reports the exit', async () => {
    const p = proc(await script(dir, 'tor', 'exit 7'));
    const lines: string[] = [];
    p.on('line', ({ stream, text }) => lines.push(`${stream}:${text}`));
    p.start();
    expect(p.pid).to.be.a('number');
    const exit = await p.exited;
    expect(exit).to.deep.equal({ code: 7, signal: null });
    expect(p.running).to.equal(false);
    await new Promise((r) => setTimeout(r, 50));
    expect(lines).to.include('stdout:args: -f /path/to/torrc');
    expect(lines).to.include('stderr:to stderr');
  });

  it('passes --defaults-torrc first when given', async () => {
    const p = proc(await script(dir, 'tor', 'exit 0'), '/empty/defaults');
    const lines: string[] = [];
    p.on('line', ({ text }) => lines.push(text));
    p.start();
    await p.exited;
    await new Promise((r) => setTimeout(r, 50));
    expect(lines).to.include('args: --defaults-torrc /empty/defaults -f /path/to/torrc');
  });

  it('stop() ends a cooperative process with SIGTERM', async () => {
    const p = proc(await script(dir, 'tor', 'exec sleep 30'));
    p.start();
    const pid = p.pid!;
    const exit = await p.stop(5_000);
    // SIGTERM, not the SIGKILL that ends the grace: it did not wait for the grace.
    expect(exit.signal).to.equal('SIGTERM');
    expect(isAlive(pid)).to.equal(false);
  });

  it('stop() SIGKILLs that PID after the grace when SIGTERM is ignored', async () => {
    const p = proc(await script(dir, 'tor', "trap '' TERM\nwhile true; do sleep 0.05; done"));
    p.start();
    await new Promise((r) => setTimeout(r, 100)); // let the trap be installed
    const started = Date.now();
    const exit = await p.stop(300);
    expect(exit.signal).to.equal('SIGKILL');
    expect(Date.now() - started, 'after the grace').to.be.at.least(250);
    expect(isAlive(p.pid ?? -1)).to.equal(false);
  });

  it('stop() ends a SIGSTOPped (frozen) process', async () => {
    const p = proc(await script(dir, 'tor', 'exec sleep 30'));
    p.start();
    await new Promise((r) => setTimeout(r, 50));
    process.kill(p.pid!, 'SIGSTOP');
    const exit = await p.stop(2_000);
    expect(exit.signal).to.be.oneOf(['SIGTERM', 'SIGKILL']);
  });

  it('reports a missing binary as an exit with spawnError, without throwing', async () => {
    const p = proc(join(dir, 'no-such-tor'));
    p.start();
    const exit = await p.exited;
    expect(exit.spawnError).to.match(/ENOENT/);
    expect(p.running).to.equal(false);
    expect(await p.stop(100)).to.equal(exit);
  });

  it('refuses to start twice and stop() before start() resolves', async () => {
    const p = proc(await script(dir, 'tor', 'exit 0'));
    const q = proc(await script(dir, 'tor2', 'exit 0'));
    expect((await q.stop(100)).code).to.equal(null);
    p.start();
    expect(() => p.start()).to.throw();
    await p.exited;
  });
});
