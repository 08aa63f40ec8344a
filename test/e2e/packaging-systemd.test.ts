import { expect } from 'chai';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { packageRoot } from '../../shared/version.js';
import { STATE_FILE_NAME } from '../../supervisor/state/sqlite-state-store.js';
import { serviceEnv } from '../support/fixtures/service.js';
import { expectSessionKeptAcross, waitRoutable } from '../support/fixtures/packaged-service.js';
import { servicePorts } from '../support/network/free-ports.js';
import { sharedTestnet } from '../support/fixtures/testnet.js';
import { environmentFileLine, parseServiceUnit, startUnit, type RunningUnit, type UnitPlacement } from '../support/processes/systemd-unit.js';

const POOL = 2;
const SESSION = 'systemd';

/**
 * The shipped deploy/exitpool.service, run as systemd runs it (test/support/processes/systemd-unit.ts):
 * systemd is not PID 1 on the machines these tests run on (containers, CI), so the unit's own
 * ExecStart=, Environment=, EnvironmentFile=, StateDirectory=, UMask= and stop semantics
 * (KillMode=mixed: KillSignal= to the supervisor alone, TimeoutStopSec= for everything to end)
 * are applied to a process started here. `systemctl restart` is a stop then a start.
 */
describe('packaging: the systemd unit deploy/exitpool.service, run as systemd would', function () {
  // A start and a restart, each up to two minutes on a loaded machine, and two stops.
  this.timeout(420_000);
  const unit = parseServiceUnit(fs.readFileSync(path.join(packageRoot(), 'deploy', 'exitpool.service'), 'utf8'));
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-systemd-'));
  let running: RunningUnit | undefined;

  after(async () => {
    if (running) await running.stop();
    fs.rmSync(root, { recursive: true, force: true });
  });

  it('declares what the emulation applies: SIGTERM to the supervisor alone, DATA_DIR in its StateDirectory', () => {
    expect(unit.killMode, 'the supervisor stops its own workers and tors in order').to.equal('mixed');
    expect(unit.killSignal).to.equal('SIGTERM');
    // ProtectSystem=strict leaves only ReadWritePaths= and the StateDirectory= writable: the
    // state must be written there to outlive the restart.
    expect(unit.stateDirectories).to.have.length(1);
    expect(unit.environment.DATA_DIR).to.equal(`/var/lib/${unit.stateDirectories[0]}`);
    expect(unit.settings.get('ReadWritePaths')).to.deep.equal([unit.environment.DATA_DIR]);
  });

  it('serves from its ExecStart and environment, keeps a session on its instance and exit IP across a restart, and stops with nothing left', async () => {
    const net = await sharedTestnet();
    const ports = await servicePorts(2);
    // The operator's /etc/exitpool/exitpool.env: the test network and ports, generated dashboard
    // credentials as on a real install; DATA_DIR, LOG_FORMAT and PATH come from the unit.
    const settings = serviceEnv(net, ports, { POOL_SIZE: String(POOL), PROXY_WORKERS: '1', ADMIN_PASSWORD: undefined, SPAWN_STAGGER: undefined, LOG_LEVEL: undefined });
    fs.rmSync(settings.DATA_DIR as string, { recursive: true, force: true });
    for (const name of ['DATA_DIR', 'PATH', 'HOME']) delete settings[name];
    const envFile = path.join(root, 'exitpool.env');
    fs.writeFileSync(envFile, Object.entries(settings).map(([k, v]) => environmentFileLine(k, v.replace(/\n/g, '\\n'))).join('\n') + '\n');
    const stateRoot = path.join(root, 'var-lib');
    const placement: UnitPlacement = {
      installDir: packageRoot(),
      stateRoot,
      environmentFiles: Object.fromEntries(unit.environmentFiles.map((f) => [f.path, envFile])),
    };
    const dataDir = path.join(stateRoot, unit.stateDirectories[0] as string);

    // Every start's output, as the journal keeps it across a restart.
    const starts: RunningUnit[] = [];
    const start = (): RunningUnit => {
      const u = startUnit(unit, placement);
      starts.push(u);
      return u;
    };
    const log = (): string => starts.map((u) => u.output()).join('\n--- restarted ---\n').slice(-4000);
    running = start();
    await waitRoutable(ports.api, POOL, 120_000, log);
    expect(fs.statSync(dataDir).mode & 0o777, 'StateDirectoryMode').to.equal(unit.stateDirectoryMode);

    await expectSessionKeptAcross('a restart of the unit', { net, ports, poolSize: POOL, log }, SESSION, async () => {
      const stopped = await (running as RunningUnit).stop();
      running = undefined;
      expect(stopped, `a clean stop within TimeoutStopSec, nothing left to SIGKILL:\n${log()}`).to.deep.equal({ code: 0, signal: null, leftovers: [] });
      expect(fs.existsSync(path.join(dataDir, STATE_FILE_NAME)), 'the state written in the StateDirectory').to.equal(true);
      running = start();
    });
    // UMask=0077: what the service wrote is its own alone.
    expect(fs.statSync(path.join(dataDir, STATE_FILE_NAME)).mode & 0o077).to.equal(0);

    const stopped = await (running as RunningUnit).stop();
    running = undefined;
    expect(stopped).to.deep.equal({ code: 0, signal: null, leftovers: [] });
  });
});
