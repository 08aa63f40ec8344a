/**
 * The proxy worker's start-up warm-up (workers/proxy-worker/warm-up.ts) over real loopback
 * sockets: its connections go all the way through the proxy path, and it leaves nothing behind
 * (no listener, no socket file, no handle), so a worker that ran it starts as one that did not.
 */
import { expect } from 'chai';
import fs from 'node:fs';
import os from 'node:os';
import { warmUpProxyPath } from '../../workers/proxy-worker/warm-up.js';
import { capturingLogger } from '../support/fakes/proxy-parts.js';

const warmUpSockets = (): string[] => fs.readdirSync(os.tmpdir()).filter((f) => f.startsWith(`exitpool-warm-up-${process.pid}-`));
const activeHandles = (): number => (process as unknown as { _getActiveHandles(): unknown[] })._getActiveHandles().length;

describe('proxy worker: the start-up warm-up (component, real sockets)', function () {
  this.timeout(20_000);

  it('sends its connections all the way through the proxy path, then leaves no listener, socket file or handle', async () => {
    const handlesBefore = activeHandles();
    const { logger, lines } = capturingLogger();
    const result = await warmUpProxyPath(120, logger);
    expect(result.completed, 'every connection got its answer through the tunnel').to.equal(120);
    expect(warmUpSockets(), 'the stand-in instance’s socket file is gone').to.deep.equal([]);
    // Destroyed sockets leave the handle list once libuv has closed them.
    await new Promise((resolve) => setTimeout(resolve, 100));
    const left = (process as unknown as { _getActiveHandles(): object[] })._getActiveHandles().map((h) => h.constructor.name);
    expect(activeHandles(), left.join(', ')).to.be.at.most(handlesBefore);
    expect(lines.filter((l) => l.level === 'warn' || l.level === 'error'), 'nothing refused or failed').to.deep.equal([]);
  });

  it('does nothing when turned off (PROXY_WARM_UP=0), and stops at its time limit', async () => {
    const { logger } = capturingLogger();
    expect(await warmUpProxyPath(0, logger)).to.deep.equal({ completed: 0, ms: 0 });
    const bounded = await warmUpProxyPath(1_000_000, logger, 300);
    expect(bounded.completed).to.be.above(0);
    expect(bounded.ms, 'the limit, plus the connections in flight and the closing').to.be.below(300 + 2_500);
    expect(warmUpSockets()).to.deep.equal([]);
  });
});
