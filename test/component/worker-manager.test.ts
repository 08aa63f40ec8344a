import { expect } from 'chai';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import fs from 'node:fs';
import { WORKER_GC_FLAG, WORKER_SEMI_SPACE_MIB, WorkerManager, workerExecArgv, type WorkerHandle } from '../../supervisor/cluster/worker-manager.js';
import { IpcPeerGoneError, IpcTimeoutError } from '../../shared/ipc/index.js';
import { quietLogger } from '../support/fakes/quiet-logger.js';
import { CRASH, HANG } from '../support/processes/ipc-test-worker.js';
import { isAlive } from '../support/processes/inspection.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const exec = path.join(here, '..', 'support', 'processes', 'ipc-test-worker.js');

describe('worker manager over real cluster IPC', function () {
  this.timeout(30_000);
  let manager: WorkerManager;

  beforeEach(async () => {
    manager = new WorkerManager({
      exec,
      specs: [
        { role: 'proxy', count: 2 },
        { role: 'api', count: 1 },
      ],
      env: {},
      log: quietLogger(),
      backoff: { baseMs: 50, maxMs: 400, resetAfterMs: 60_000 },
      ipcTimeoutMs: 300,
    });
    await manager.start();
  });

  afterEach(async () => {
    const pids = manager.handles().map((h) => h.worker.process.pid as number);
    await manager.stop(2000);
    for (const pid of pids) expect(isAlive(pid), `worker ${pid} left running`).to.equal(false);
  });

  it('forks the proxy workers and the API worker', () => {
    expect(manager.handles('proxy')).to.have.length(2);
    expect(manager.handles('api')).to.have.length(1);
  });

  it('bounds every worker’s young generation and runs its collector single-threaded, unless NODE_OPTIONS or the given flags say otherwise', () => {
    for (const h of manager.handles()) {
      const cmdline = fs.readFileSync(`/proc/${h.worker.process.pid}/cmdline`, 'utf8').split('\0');
      expect(cmdline).to.include(`--max-semi-space-size=${WORKER_SEMI_SPACE_MIB}`);
      expect(cmdline).to.include(WORKER_GC_FLAG);
    }
    expect(workerExecArgv(['--cpu-prof'], undefined)).to.deep.equal(['--cpu-prof', `--max-semi-space-size=${WORKER_SEMI_SPACE_MIB}`, WORKER_GC_FLAG]);
    expect(workerExecArgv([], '--max-semi-space-size=16')).to.deep.equal([WORKER_GC_FLAG]);
    expect(workerExecArgv(['--max-semi-space-size=2'], undefined)).to.deep.equal(['--max-semi-space-size=2', WORKER_GC_FLAG]);
    expect(workerExecArgv(['--no-single-threaded-gc', '--max-semi-space-size=8'], undefined)).to.deep.equal(['--no-single-threaded-gc', '--max-semi-space-size=8']);
  });

  it('round-trips a request to every worker', async () => {
    for (const h of manager.handles()) {
      const before = Date.now();
      const { receivedAt } = await h.endpoint.request('ping', { sentAt: before });
      expect(receivedAt).to.be.within(before - 5, Date.now() + 5);
    }
  });

  it('times out a request the worker never answers', async () => {
    const h = manager.handles('proxy')[0] as WorkerHandle;
    try {
      await h.endpoint.request('ping', { sentAt: HANG });
      expect.fail('should time out');
    } catch (e) {
      expect(e).to.be.instanceOf(IpcTimeoutError);
    }
    // The worker is still usable afterwards.
    expect((await h.endpoint.request('ping', { sentAt: Date.now() })).receivedAt).to.be.a('number');
  });

  it('fails a request clearly when the worker crashes, then re-forks it', async () => {
    const h = manager.handles('proxy')[0] as WorkerHandle;
    const oldPid = h.worker.process.pid as number;
    const reforked = new Promise<WorkerHandle>((resolve) =>
      manager.on('ready', (n: WorkerHandle) => {
        if (n.slot === h.slot) resolve(n);
      }),
    );
    try {
      await h.endpoint.request('ping', { sentAt: CRASH });
      expect.fail('should fail');
    } catch (e) {
      expect(e).to.be.instanceOf(IpcPeerGoneError);
    }
    const fresh = await reforked;
    expect(fresh.worker.process.pid).to.not.equal(oldPid);
    expect(fresh.role).to.equal('proxy');
    expect(manager.restarts).to.equal(1);
    expect((await fresh.endpoint.request('ping', { sentAt: Date.now() })).receivedAt).to.be.a('number');
    // The other workers were not disturbed.
    expect(manager.handles()).to.have.length(3);
  });

  it('backs off when a slot keeps crashing', async () => {
    const delays: number[] = [];
    manager.on('restart', (_role: string, _slot: number, delay: number) => delays.push(delay));
    for (let i = 0; i < 3; i++) {
      const h = manager.handles('api')[0] as WorkerHandle;
      const next = new Promise<void>((resolve) =>
        manager.on('ready', (n: WorkerHandle) => {
          if (n.role === 'api' && n !== h) resolve();
        }),
      );
      h.worker.process.kill('SIGKILL');
      await next;
    }
    expect(delays).to.deep.equal([50, 100, 200]);
  });
});
