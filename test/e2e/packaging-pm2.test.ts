import { expect } from 'chai';
import { execFile, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { packageRoot } from '../../shared/version.js';
import { isAlive, waitAllGone } from '../support/processes/inspection.js';
import { serviceEnv } from '../support/fixtures/service.js';
import { expectSessionKeptAcross, waitRoutable } from '../support/fixtures/packaged-service.js';
import { servicePorts } from '../support/network/free-ports.js';
import { sharedTestnet } from '../support/fixtures/testnet.js';
import { pollUntil } from '../support/waiting.js';

function pm2(args: string[], env: NodeJS.ProcessEnv): Promise<string> {
  const bin = path.join(packageRoot(), 'node_modules', '.bin', 'pm2');
  return new Promise((resolve, reject) => {
    execFile(bin, args, { env, cwd: packageRoot(), timeout: 90_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`pm2 ${args.join(' ')} failed: ${stderr || err.message}`));
      else resolve(stdout);
    });
  });
}

/** What pm2 captured of the service, file by file (its logs live in PM2_HOME, which after() removes). */
function pm2LogFiles(pm2Home: string): { name: string; text: string }[] {
  const dir = path.join(pm2Home, 'logs');
  if (!fs.existsSync(dir)) return [];
  return fs.readdirSync(dir).map((name) => ({ name, text: fs.readFileSync(path.join(dir, name), 'utf8') }));
}

/** The service's lines that say a tor exited without the supervisor stopping it. */
function torDeaths(pm2Home: string): string[] {
  return pm2LogFiles(pm2Home).flatMap((f) => f.text.split('\n').filter((line) => line.includes('tor exited unexpectedly')));
}

/** The end of each log, for a failed assertion. */
function pm2Logs(pm2Home: string): string {
  const files = pm2LogFiles(pm2Home);
  return files.length === 0 ? '(pm2 wrote no logs)' : files.map((f) => `--- ${f.name}\n${f.text.slice(-3000)}`).join('\n');
}

/** The supervisor's pid under pm2 now. */
async function pm2Pid(env: NodeJS.ProcessEnv): Promise<number> {
  const app = (JSON.parse(await pm2(['jlist'], env)) as { name: string; pid: number }[]).find((a) => a.name === 'exitpool');
  expect(app?.pid, 'pm2 lists exitpool with a pid').to.be.a('number').and.above(0);
  return app!.pid;
}

/** The tor processes a supervisor started. */
function torsOf(supervisorPid: number): number[] {
  return execFileSync('pgrep', ['-P', String(supervisorPid), '-x', 'tor']).toString().trim().split('\n').map(Number);
}

const POOL = 2;
const SESSION = 'pm2';

/**
 * The shipped ecosystem.config.cjs under pm2 (from npm): the supervisor in fork mode, /health
 * answering, and a stop that leaves no tor behind (pm2's kill_timeout covers tor's flush).
 */
describe('packaging: under pm2 with ecosystem.config.cjs', function () {
  // A start and two restarts, each up to two minutes on a loaded machine.
  this.timeout(480_000);
  const pm2Home = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-pm2-'));
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-pm2-data-'));
  let env: NodeJS.ProcessEnv;

  after(async () => {
    await pm2(['kill'], env).catch(() => undefined);
    fs.rmSync(pm2Home, { recursive: true, force: true });
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('starts in fork mode, answers /health, keeps a session on its instance and exit IP across pm2 restart and pm2 reload, and stops with no tor left', async () => {
    const net = await sharedTestnet();
    const ports = await servicePorts(2);
    // pm2 runs the service as shipped: generated dashboard credentials, default logging.
    env = serviceEnv(net, ports, { PM2_HOME: pm2Home, DATA_DIR: dataDir, POOL_SIZE: String(POOL), PROXY_WORKERS: '1', ADMIN_PASSWORD: undefined, SPAWN_STAGGER: undefined, LOG_LEVEL: undefined });
    await pm2(['start', 'ecosystem.config.cjs'], env);
    const list = JSON.parse(await pm2(['jlist'], env)) as { name: string; pid: number; pm2_env: { exec_mode: string } }[];
    const app = list.find((a) => a.name === 'exitpool');
    expect(app, 'pm2 lists exitpool').to.not.equal(undefined);
    expect(app!.pm2_env.exec_mode).to.equal('fork_mode');
    const supervisorPid = app!.pid;

    const service = { net, ports, poolSize: POOL, log: () => pm2Logs(pm2Home) };
    await waitRoutable(ports.api, POOL, 120_000, service.log);
    expect(torsOf(supervisorPid)).to.have.length(POOL);

    // pm2 restart (SIGINT, then a new process), then pm2 reload (in fork mode pm2 stops the
    // process and starts it again, not a rolling swap), each from the state the one before wrote:
    // the session keeps its exit IP (durable state), and the old supervisor and its tors are gone.
    let current = supervisorPid;
    for (const command of ['restart', 'reload'] as const) {
      const before = current;
      const tors = torsOf(before);
      await expectSessionKeptAcross(`pm2 ${command}`, service, SESSION, async () => {
        await pm2([command, 'exitpool'], env);
        expect(await waitAllGone([before, ...tors], 30_000), `the supervisor before pm2 ${command} and its tors are gone`).to.deep.equal([]);
      });
      const next = await pm2Pid(env);
      expect(next, `a new supervisor after pm2 ${command}`).to.not.equal(before);
      current = next;
    }
    // pm2 signalled the supervisor alone (treekill: false), which drained and then stopped its
    // tors itself: none died under it. With pm2's default tree kill every tor gets the signal
    // first, its tunnels are cut without SHUTDOWN_GRACE, and a session can be moved off a dying
    // tor into the state the next start restores.
    expect(torDeaths(pm2Home), 'tors that exited before their supervisor stopped them').to.deep.equal([]);

    const torPids = torsOf(current);
    await pm2(['stop', 'exitpool'], env);
    expect(await waitAllGone([current, ...torPids], 30_000)).to.deep.equal([]);
    expect(isAlive(current)).to.equal(false);
  });
});

/** The app's state as pm2 lists it. */
async function pm2App(env: NodeJS.ProcessEnv): Promise<{ status: string; restarts: number; exitCode: number | undefined } | undefined> {
  const app = (JSON.parse(await pm2(['jlist'], env)) as { name: string; pm2_env: { status: string; restart_time: number; exit_code?: number } }[]).find((a) => a.name === 'exitpool');
  return app ? { status: app.pm2_env.status, restarts: app.pm2_env.restart_time, exitCode: app.pm2_env.exit_code } : undefined;
}

/** Issue 36: a start that cannot succeed as configured (exit 78) is not restarted by pm2. */
describe('packaging: pm2 leaves a configuration error stopped (stop_exit_codes)', function () {
  this.timeout(120_000);
  const pm2Home = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-pm2-78-'));
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: pm2Home, PM2_HOME: pm2Home, DATA_DIR: path.join(pm2Home, 'data'), POOL_SIZE: 'not-a-number' };

  after(async () => {
    await pm2(['kill'], env).catch(() => undefined);
    fs.rmSync(pm2Home, { recursive: true, force: true });
  });

  it('exits 78 once and stays stopped, with the reason in its log', async () => {
    await pm2(['start', 'ecosystem.config.cjs'], env);
    const stopped = await pollUntil('pm2 to see the exit', () => pm2App(env), 60_000, { intervalMs: 250, until: (a) => a !== undefined && a.status !== 'online' && a.status !== 'launching' });
    // Long enough for pm2's restarts, had it any to make (it restarts at once, then with min_uptime's budget).
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    const after = await pm2App(env);
    expect(after, pm2Logs(pm2Home)).to.deep.include({ status: 'stopped', restarts: 0 });
    expect(stopped?.exitCode ?? after?.exitCode).to.equal(78);
    expect(pm2Logs(pm2Home)).to.include('POOL_SIZE: not an integer');
  });
});
