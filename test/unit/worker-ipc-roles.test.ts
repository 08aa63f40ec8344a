import { expect } from 'chai';
import { ExitpoolError } from '../../shared/errors/catalogue.js';
import type { WorkerHandle } from '../../supervisor/cluster/worker-manager.js';
import { workerRequestHandlers, type WorkerIpcDeps } from '../../supervisor/worker-ipc.js';

/**
 * A proxy worker holds the lowest credential's view (token digests); the API worker's snapshot
 * and the sign-in limiter are the API worker's. The supervisor answers a worker only with its
 * own role's methods, so a compromised proxy worker cannot read the API's snapshot.
 */
describe('the supervisor answers each worker role only its own credential methods', () => {
  const snapshots = { proxy: { version: 1, role: 'proxy' }, api: { version: 1, role: 'api' } };
  const deps = {
    store: { snapshots: () => snapshots },
    signInLimiter: { attempt: () => ({ allowed: true }) },
  } as unknown as WorkerIpcDeps;
  const handlersOf = (role: 'proxy' | 'api'): ReturnType<typeof workerRequestHandlers> =>
    workerRequestHandlers({ role, slot: 1 } as unknown as WorkerHandle, deps);
  const codeOf = (call: () => unknown): string => {
    try {
      call();
      return 'answered';
    } catch (e) {
      return e instanceof ExitpoolError ? e.code : String(e);
    }
  };

  it('gives a proxy worker its snapshot and refuses it the API snapshot and the sign-in limiter', () => {
    const proxy = handlersOf('proxy');
    expect(proxy['credentials.proxy'](null)).to.equal(snapshots.proxy);
    expect(codeOf(() => proxy['credentials.api'](null))).to.equal('EXITPOOL_WRONG_ROLE');
    expect(codeOf(() => proxy['signin.attempt']({ bucket: 'address:192.0.2.1' }))).to.equal('EXITPOOL_WRONG_ROLE');
  });

  it('gives the API worker its snapshot and the limiter, and refuses it the proxy snapshot', () => {
    const api = handlersOf('api');
    expect(api['credentials.api'](null)).to.equal(snapshots.api);
    expect(codeOf(() => api['signin.attempt']({ bucket: 'address:192.0.2.1' }))).to.equal('answered');
    expect(codeOf(() => api['credentials.proxy'](null))).to.equal('EXITPOOL_WRONG_ROLE');
  });
});
