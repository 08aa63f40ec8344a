import { expect } from 'chai';
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { packageRoot } from '../../shared/version.js';
import { processUser, waitAllGone } from '../support/processes/inspection.js';
import { TEST_PROXY_TOKEN, serviceEnv } from '../support/fixtures/service.js';
import { servicePorts } from '../support/network/free-ports.js';
import { curlSocks } from '../support/clients/curl.js';
import { sharedTestnet } from '../support/fixtures/testnet.js';

/** The unprivileged account the test runs the installed service as (like the image's `exitpool`). */
const RUNTIME_USER = 'exitpool-test';

/**
 * The container's runtime steps, exercised on this machine: scripts/install-runtime.sh (the
 * Dockerfile's runtime stage) into a clean directory, then the installed launcher run as a
 * non-root user with a private DATA_DIR, serving on the private network and stopping cleanly.
 */
describe('packaging: the runtime install, run as a non-root user', function () {
  this.timeout(300_000);
  const target = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-runtime-'));
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-runtime-data-'));

  before(function () {
    expect(process.getuid?.(), 'the packaging test creates a user, so it runs as root (as CI does)').to.equal(0);
    try {
      execFileSync('id', [RUNTIME_USER], { stdio: 'ignore' });
    } catch {
      execFileSync('useradd', ['--system', '--no-create-home', '--shell', '/usr/sbin/nologin', RUNTIME_USER]);
    }
    execFileSync('chown', [RUNTIME_USER, dataDir]);
    fs.chmodSync(dataDir, 0o700);
  });

  after(() => {
    fs.rmSync(target, { recursive: true, force: true });
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('installs production dependencies only, into a clean directory', () => {
    execFileSync('bash', [path.join(packageRoot(), 'scripts', 'install-runtime.sh'), target], { stdio: 'pipe' });
    expect(fs.existsSync(path.join(target, 'dist', 'supervisor', 'cli.js'))).to.equal(true);
    expect(fs.existsSync(path.join(target, 'node_modules', 'express'))).to.equal(true);
    expect(fs.existsSync(path.join(target, 'node_modules', 'mocha')), 'dev dependency installed').to.equal(false);
    expect(fs.existsSync(path.join(target, 'dist', 'test')), 'tests shipped').to.equal(false);
    // The systemd unit's Documentation= names a file the install brings (the unit assumes /opt/exitpool).
    const unit = fs.readFileSync(path.join(packageRoot(), 'deploy', 'exitpool.service'), 'utf8');
    const documentation = /^Documentation=file:\/\/\/opt\/exitpool\/(\S+)$/m.exec(unit)?.[1];
    expect(documentation, 'Documentation= a file under /opt/exitpool').to.be.a('string');
    expect(fs.existsSync(path.join(target, documentation as string)), `${documentation} installed`).to.equal(true);
    const version = execFileSync(process.execPath, [path.join(target, 'bin', 'exitpool'), 'version']).toString().trim();
    expect(version).to.equal(JSON.parse(fs.readFileSync(path.join(packageRoot(), 'package.json'), 'utf8')).version);
  });

  it('serves as the non-root user and stops gracefully with no tor left', async () => {
    const net = await sharedTestnet();
    const ports = await servicePorts(2);
    // As installed: generated dashboard credentials, default logging, the runtime user's home.
    const env = serviceEnv(net, ports, { HOME: dataDir, DATA_DIR: dataDir, POOL_SIZE: '2', PROXY_WORKERS: '1', ADMIN_PASSWORD: undefined, SPAWN_STAGGER: undefined, LOG_LEVEL: undefined });
    const child = spawn('runuser', ['-u', RUNTIME_USER, '--', process.execPath, path.join(target, 'bin', 'exitpool'), 'serve'], {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      const deadline = Date.now() + 120_000;
      let healthy = false;
      while (!healthy && Date.now() < deadline) {
        healthy = await fetch(`http://127.0.0.1:${ports.api}/health`).then((r) => r.ok, () => false);
        if (!healthy) await new Promise((r) => setTimeout(r, 300));
      }
      expect(healthy, `never healthy:\n${out.slice(-3000)}`).to.equal(true);
      // The supervisor (runuser's child) runs as the unprivileged user, and so do its tors.
      const supervisorPid = Number(execFileSync('pgrep', ['-P', String(child.pid)]).toString().trim().split('\n')[0]);
      expect(processUser(supervisorPid)).to.equal(RUNTIME_USER);
      const r = await curlSocks(ports.socks, 'packaged', TEST_PROXY_TOKEN, `http://whoami.testnet:${net.whoami.port}/`);
      expect(r.code, r.stderr).to.equal(0);
      expect(r.stdout.trim()).to.match(/^127\.\d+\.\d+\.\d+$/);
      const auth = fs.statSync(path.join(dataDir, 'auth.json'));
      expect(auth.mode & 0o777).to.equal(0o600);
      // /health turns 200 with the first routable instance; the second tor may still be starting
      // (or restarting) on a loaded machine, so wait for both rather than sample once.
      const userTors = (): number[] => {
        try {
          return execFileSync('pgrep', ['-u', RUNTIME_USER, '-x', 'tor']).toString().trim().split('\n').map(Number);
        } catch {
          return []; // pgrep exits 1 when nothing matches
        }
      };
      let torPids = userTors();
      for (const until = Date.now() + 60_000; torPids.length < 2 && Date.now() < until; torPids = userTors()) await new Promise((r) => setTimeout(r, 250));
      expect(torPids, `tors of the runtime user:\n${out.slice(-3000)}`).to.have.length(2);
      for (const pid of torPids) expect(processUser(pid)).to.equal(RUNTIME_USER);
      process.kill(supervisorPid, 'SIGTERM');
      expect(await exited).to.equal(0);
      expect(await waitAllGone(torPids, 15_000)).to.deep.equal([]);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });
});
