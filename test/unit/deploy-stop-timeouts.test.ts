/**
 * pm2, systemd and Docker each SIGKILL the service after their own stop timeout. Each must leave
 * room for the default SHUTDOWN_GRACE (open connections finish), the workers' exit margin and
 * tor's own stop, or a deploy cuts connections the service meant to let finish.
 */
import { expect } from 'chai';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { VARIABLES } from '../../shared/config/index.js';
import { WORKER_EXIT_MARGIN_MS } from '../../supervisor/cluster/worker-manager.js';
import { DEFAULT_STOP_GRACE_MS } from '../../supervisor/tor/tor-process.js';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

function defaultShutdownGraceMs(): number {
  const v = VARIABLES.find((d) => d.name === 'SHUTDOWN_GRACE');
  if (!v || v.defaultText === null) throw new Error('SHUTDOWN_GRACE has no default');
  return v.parse(v.defaultText) as number;
}

describe('deploy files: stop timeouts agree with SHUTDOWN_GRACE', () => {
  const needed = defaultShutdownGraceMs() + WORKER_EXIT_MARGIN_MS + DEFAULT_STOP_GRACE_MS;

  it('pm2 kill_timeout, the supervisor alone signalled, and no restart loop on exit 78', () => {
    const ecosystem = createRequire(import.meta.url)(path.join(repo, 'ecosystem.config.cjs')) as { apps: { kill_timeout: number; treekill: boolean; stop_exit_codes: number[] }[] };
    expect(ecosystem.apps[0]?.kill_timeout).to.be.above(needed);
    // pm2's default tree kill signals the tors before the supervisor (test/e2e/packaging-pm2.test.ts).
    expect(ecosystem.apps[0]?.treekill).to.equal(false);
    expect(ecosystem.apps[0]?.stop_exit_codes).to.deep.equal([78]);
  });

  it('systemd signals the supervisor alone (KillMode=mixed)', () => {
    const unit = fs.readFileSync(path.join(repo, 'deploy', 'exitpool.service'), 'utf8');
    expect(unit).to.match(/^KillMode=mixed$/m);
  });

  it('systemd TimeoutStopSec, and no restart loop on exit 78', () => {
    const unit = fs.readFileSync(path.join(repo, 'deploy', 'exitpool.service'), 'utf8');
    const seconds = Number(/^TimeoutStopSec=(\d+)$/m.exec(unit)?.[1]);
    expect(seconds * 1000).to.be.above(needed);
    expect(unit).to.match(/^RestartPreventExitStatus=78$/m);
  });

  it('Docker compose stop_grace_period', () => {
    const compose = fs.readFileSync(path.join(repo, 'compose.yml'), 'utf8');
    const seconds = Number(/stop_grace_period:\s*(\d+)s/.exec(compose)?.[1]);
    expect(seconds * 1000).to.be.above(needed);
  });
});
