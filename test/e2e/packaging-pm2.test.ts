import { expect } from 'chai';
import { execFile, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { packageRoot } from '../../shared/version.js';
import { curlSocks } from '../support/clients/curl.js';
import { isAlive, waitAllGone } from '../support/processes/inspection.js';
import { TEST_PROXY_TOKEN, serviceEnv } from '../support/fixtures/service.js';
import { servicePorts } from '../support/network/free-ports.js';
import { sharedTestnet } from '../support/fixtures/testnet.js';

function pm2(args: string[], env: NodeJS.ProcessEnv): Promise<string> {
  const bin = path.join(packageRoot(), 'node_modules', '.bin', 'pm2');
  return new Promise((resolve, reject) => {
    execFile(bin, args, { env, cwd: packageRoot(), timeout: 90_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`pm2 ${args.join(' ')} failed: ${stderr || err.message}`));
      else resolve(stdout);
    });
  });
}

/** The end of what pm2 captured of the service (its logs live in PM2_HOME, which after() removes). */
function pm2Logs(pm2Home: string): string {
  const dir = path.join(pm2Home, 'logs');
  if (!fs.existsSync(dir)) return '(pm2 wrote no logs)';
  return fs
    .readdirSync(dir)
    .map((f) => `--- ${f}\n${fs.readFileSync(path.join(dir, f), 'utf8').slice(-3000)}`)
    .join('\n');
}

/**
 * The shipped ecosystem.config.cjs under pm2 (from npm): the supervisor in fork mode, /health
 * answering, and a stop that leaves no tor behind (pm2's kill_timeout covers tor's flush).
 */
describe('packaging: under pm2 with ecosystem.config.cjs', function () {
  this.timeout(240_000);
  const pm2Home = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-pm2-'));
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-pm2-data-'));
  let env: NodeJS.ProcessEnv;

  after(async () => {
    await pm2(['kill'], env).catch(() => undefined);
    fs.rmSync(pm2Home, { recursive: true, force: true });
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('starts in fork mode, answers /health, keeps a session on its exit IP across pm2 restart, and stops with no tor left', async () => {
    const net = await sharedTestnet();
    const ports = await servicePorts(2);
    // pm2 runs the service as shipped: generated dashboard credentials, default logging.
    env = serviceEnv(net, ports, { PM2_HOME: pm2Home, DATA_DIR: dataDir, POOL_SIZE: '2', PROXY_WORKERS: '1', ADMIN_PASSWORD: undefined, SPAWN_STAGGER: undefined, LOG_LEVEL: undefined });
    await pm2(['start', 'ecosystem.config.cjs'], env);
    const list = JSON.parse(await pm2(['jlist'], env)) as { name: string; pid: number; pm2_env: { exec_mode: string } }[];
    const app = list.find((a) => a.name === 'exitpool');
    expect(app, 'pm2 lists exitpool').to.not.equal(undefined);
    expect(app!.pm2_env.exec_mode).to.equal('fork_mode');
    const supervisorPid = app!.pid;

    const deadline = Date.now() + 120_000;
    let healthy = false;
    while (!healthy && Date.now() < deadline) {
      healthy = await fetch(`http://127.0.0.1:${ports.api}/health`).then((r) => r.ok, () => false);
      if (!healthy) await new Promise((r) => setTimeout(r, 300));
    }
    expect(healthy, `GET /health answers 200 under pm2; the service's log under pm2:\n${pm2Logs(pm2Home)}`).to.equal(true);
    const r = await curlSocks(ports.socks, 'pm2', TEST_PROXY_TOKEN, `http://whoami.testnet:${net.whoami.port}/`);
    expect(r.code, r.stderr).to.equal(0);

    const firstTors = execFileSync('pgrep', ['-P', String(supervisorPid), '-x', 'tor']).toString().trim().split('\n').map(Number);
    expect(firstTors).to.have.length(2);

    // pm2 restart (SIGINT, then a new process): the session keeps its exit IP (durable state).
    const ip = r.stdout.trim();
    await pm2(['restart', 'exitpool'], env);
    expect(await waitAllGone([supervisorPid, ...firstTors], 30_000), 'the old supervisor and its tors are gone').to.deep.equal([]);
    const restarted = (JSON.parse(await pm2(['jlist'], env)) as { name: string; pid: number }[]).find((a) => a.name === 'exitpool');
    expect(restarted?.pid).to.be.a('number').and.not.equal(supervisorPid);
    let again = await curlSocks(ports.socks, 'pm2', TEST_PROXY_TOKEN, `http://whoami.testnet:${net.whoami.port}/`);
    for (const until = Date.now() + 120_000; again.code !== 0 && Date.now() < until; ) {
      await new Promise((res) => setTimeout(res, 300));
      again = await curlSocks(ports.socks, 'pm2', TEST_PROXY_TOKEN, `http://whoami.testnet:${net.whoami.port}/`);
    }
    expect(again.code, `${again.stderr}\n${pm2Logs(pm2Home)}`).to.equal(0);
    expect(again.stdout.trim(), `the same exit IP after pm2 restart; the service's log under pm2:\n${pm2Logs(pm2Home)}`).to.equal(ip);

    const torPids = execFileSync('pgrep', ['-P', String(restarted!.pid), '-x', 'tor']).toString().trim().split('\n').map(Number);
    await pm2(['stop', 'exitpool'], env);
    expect(await waitAllGone([restarted!.pid, ...torPids], 30_000)).to.deep.equal([]);
    expect(isAlive(restarted!.pid)).to.equal(false);
  });
});
