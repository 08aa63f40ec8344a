/**
 * The service's npm tarball as a user gets it: its contents, `npm install -g` into a clean
 * prefix, then the installed `exitpool demo` (its own private Tor network) serving a proxied
 * request, and the installed `exitpool` starting on the shared private network.
 */
import { expect } from 'chai';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { errorMessage } from '../../shared/errors/error-message.js';
import { curlSocks } from '../support/clients/curl.js';
import { TEST_PROXY_TOKEN, serviceEnv } from '../support/fixtures/service.js';
import { sharedTestnet } from '../support/fixtures/testnet.js';
import { servicePorts } from '../support/network/free-ports.js';
import { artifactPath, releaseVersion } from '../support/release/artifacts.js';
import { pollUntil } from '../support/waiting.js';

/** Every tor process whose command line names a path under `dir`. */
function torsUnder(dir: string): number[] {
  const pids: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmdline = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (path.basename(cmdline[0] ?? '') === 'tor' && cmdline.some((arg) => arg.startsWith(dir))) pids.push(Number(entry));
    } catch {
      // gone while we looked
    }
  }
  return pids;
}

/** Output collected from a child, and its exit. */
function watch(child: ChildProcess): { output: () => string; exited: Promise<number | null> } {
  let out = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  return { output: () => out, exited: new Promise((resolve) => child.once('exit', (code) => resolve(code))) };
}

describe('release: the service as an npm package', function () {
  this.timeout(300_000);
  const version = releaseVersion();
  let prefix: string;
  let home: string;
  let installed: string;
  let exitpool: string;
  let userPath: string;

  before(() => {
    prefix = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-global-'));
    home = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-global-home-'));
    installed = path.join(prefix, 'lib', 'node_modules', 'exitpool');
    exitpool = path.join(prefix, 'bin', 'exitpool');
    // A user's shell: the clean prefix's bin first, then Node 24 (the bundled one this test runs
    // on: the machine's own Node may be older), then the system.
    userPath = [path.join(prefix, 'bin'), path.dirname(process.execPath), '/usr/local/bin', '/usr/bin', '/bin'].join(':');
  });
  after(() => {
    for (const dir of [prefix, home]) if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('packs the compiled service, its launcher, the demo shim and the docs, and nothing of the tests', () => {
    const files = execFileSync('tar', ['-tzf', artifactPath('service')], { encoding: 'utf8' }).trim().split('\n');
    for (const file of ['package/package.json', 'package/LICENSE', 'package/README.md', 'package/CHANGELOG.md', 'package/bin/exitpool', 'package/dist/supervisor/cli.js', 'package/dist/workers/main.js', 'package/dist/dashboard/index.html', 'package/docs/configuration.md']) {
      expect(files, file).to.include(file);
    }
    expect(files.some((f) => f.startsWith('package/internal/testnet/shim/') && f.endsWith('.c')), 'the testnet shim source (exitpool demo compiles it)').to.equal(true);
    for (const unwanted of [/^package\/dist\/(test|bench|clients)\//, /\.map$/, /^package\/node_modules\//, /^package\/(test|bench|clients|release)\//, /\.ts$/]) {
      expect(files.filter((f) => unwanted.test(f)), String(unwanted)).to.deep.equal([]);
    }
    const manifest = JSON.parse(execFileSync('tar', ['-xzOf', artifactPath('service'), 'package/package.json'], { encoding: 'utf8' })) as { version: string; private?: boolean; license: string };
    expect(manifest.version).to.equal(version);
    expect(manifest.private).to.equal(undefined);
    expect(manifest.license).to.equal('MIT');
  });

  it('installs with npm install -g into a clean prefix', () => {
    // The machine's npm settings (registry, certificates, cache) as a user has them; only the prefix is new.
    execFileSync('npm', ['install', '--global', '--prefix', prefix, '--no-audit', '--no-fund', '--loglevel=error', artifactPath('service')], {
      env: { ...process.env, PATH: userPath },
      stdio: 'pipe',
    });
    expect(fs.realpathSync(exitpool)).to.equal(path.join(installed, 'bin', 'exitpool'));
    expect(execFileSync(exitpool, ['version'], { env: { PATH: userPath, HOME: home }, encoding: 'utf8' }).trim()).to.equal(version);
    expect(fs.existsSync(path.join(installed, 'node_modules', 'express')), 'dependencies installed').to.equal(true);
    expect(fs.existsSync(path.join(installed, 'node_modules', 'mocha')), 'dev dependencies installed').to.equal(false);
  });

  it('`exitpool demo` starts its private network and serves a proxied request through it', async () => {
    const ports = await servicePorts(2);
    const child = spawn(exitpool, ['demo'], {
      env: {
        PATH: userPath,
        HOME: home,
        POOL_SIZE: '2',
        SOCKS_PORT: String(ports.socks),
        HTTP_PORT: String(ports.http),
        API_PORT: String(ports.api),
        INSTANCE_PORT_BASE: String(ports.instanceBase),
        LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const { output, exited } = watch(child);
    try {
      // The banner names the generated proxy token and the network's whoami destination.
      const banner = await pollUntil(
        'the demo banner',
        () => {
          const token = /proxy token\s+(tp_\S+)/.exec(output())?.[1];
          const destination = /destination\s+(http:\/\/whoami\.testnet:\d+\/)/.exec(output())?.[1];
          if (child.exitCode !== null) throw new Error(`the demo exited (${child.exitCode})`);
          return token && destination ? { token, destination } : undefined;
        },
        240_000,
        500,
      ).catch((e: unknown) => {
        throw new Error(`${errorMessage(e)}\nthe demo's output:\n${output().slice(-4000)}`);
      });
      const r = await pollUntil('a request through the demo', async () => {
        const attempt = await curlSocks(ports.socks, 'alice', banner.token, banner.destination);
        return attempt.code === 0 ? attempt : undefined;
      }, 60_000, 1000);
      expect(r.stdout.trim()).to.match(/^127\.\d+\.\d+\.\d+$/);
      child.kill('SIGINT');
      expect(await exited, output().slice(-3000)).to.equal(0);
      expect(torsUnder(installed), "the demo's tors after it stopped").to.deep.equal([]);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });

  it('`exitpool` (serve) starts on the private network and stops on SIGTERM', async () => {
    const net = await sharedTestnet();
    const ports = await servicePorts(2);
    const env = serviceEnv(net, ports, { PATH: userPath, HOME: home, POOL_SIZE: '2', PROXY_WORKERS: '1', LOG_LEVEL: 'warn' });
    const child = spawn(exitpool, [], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    const { output, exited } = watch(child);
    try {
      await pollUntil('the installed service answers 200 on /health', async () => ((await fetch(`http://127.0.0.1:${ports.api}/health`)).ok ? true : undefined), 120_000, 300).catch(
        (e: unknown) => {
          throw new Error(`${errorMessage(e)}\nthe service's output:\n${output().slice(-4000)}`);
        },
      );
      const r = await curlSocks(ports.socks, 'installed', TEST_PROXY_TOKEN, `http://whoami.testnet:${net.whoami.port}/`);
      expect(r.code, r.stderr).to.equal(0);
      expect(r.stdout.trim()).to.match(/^127\.\d+\.\d+\.\d+$/);
      child.kill('SIGTERM');
      expect(await exited, output().slice(-3000)).to.equal(0);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
      fs.rmSync(env.DATA_DIR as string, { recursive: true, force: true });
    }
  });
});
