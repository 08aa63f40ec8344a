/**
 * The supervisor's side of `egress.fetch` (supervisor/worker-port.ts): a proxy worker's answer is
 * checked before the exits read it (a worker is not trusted with what decides distinctness and
 * bans), and a fetch asked for before any proxy worker is up waits for one within its own time.
 */
import { expect } from 'chai';
import type { EgressFetch } from '../../shared/ipc/protocol.js';
import type { WorkerManager } from '../../supervisor/cluster/worker-manager.js';
import { WorkerPort } from '../../supervisor/worker-port.js';
import { quietLogger } from '../support/fakes/quiet-logger.js';

const FETCH: EgressFetch = { socks: { host: '127.0.0.1', port: 9 }, url: 'http://whoami.testnet/ip', timeoutMs: 1_000, maxBytes: 64 };

/** A WorkerPort over a fake manager whose one proxy worker answers `answer` (or none at first). */
function port(answer: unknown, upAfterMs = 0): { port: WorkerPort; asked: EgressFetch[] } {
  const asked: EgressFetch[] = [];
  const upAt = Date.now() + upAfterMs;
  const handle = { slot: 0, endpoint: { request: (_m: string, params: EgressFetch) => (asked.push(params), Promise.resolve(answer)) } };
  const manager = { liveHandles: () => (Date.now() >= upAt ? [handle] : []) } as unknown as WorkerManager;
  const p = new WorkerPort(quietLogger());
  p.bind(manager);
  return { port: p, asked };
}

describe('worker port: a GET through an instance (egress.fetch)', () => {
  it('passes a well-formed answer on', async () => {
    const ok = { ok: true, status: 200, body: '127.21.0.8\n' };
    expect(await port(ok).port.fetchThroughInstance(FETCH)).to.deep.equal(ok);
    const failed = { ok: false, failure: 'socks', socksReply: 4, status: null, detail: 'host unreachable' };
    expect(await port(failed).port.fetchThroughInstance(FETCH)).to.deep.equal(failed);
  });

  for (const [name, answer] of [
    ['nothing', undefined],
    ['a body longer than asked for', { ok: true, status: 200, body: 'x'.repeat(65) }],
    ['a body that is not text', { ok: true, status: 200, body: { ip: '1.2.3.4' } }],
    ['a failure it does not know', { ok: false, failure: 'teapot', detail: '' }],
    ['a failure without detail', { ok: false, failure: 'timeout' }],
    ['a list', ['127.0.0.1']],
  ] as const) {
    it(`reads ${name} from a worker as no answer`, async () => {
      expect(await port(answer).port.fetchThroughInstance(FETCH)).to.equal(null);
    });
  }

  it('waits for a proxy worker that is not up yet, within the fetch’s time, and gives the worker only what is left', async () => {
    const { port: p, asked } = port({ ok: true, status: 200, body: '127.0.0.1' }, 300);
    expect(await p.fetchThroughInstance(FETCH)).to.deep.include({ ok: true });
    expect(asked[0]?.timeoutMs).to.be.within(1, FETCH.timeoutMs - 250);
    expect(await port({ ok: true, status: 200, body: '' }, 5_000).port.fetchThroughInstance({ ...FETCH, timeoutMs: 300 }), 'none within its time').to.equal(null);
  });
});
