import { expect } from 'chai';
import {
  IpcEndpoint,
  IpcPeerGoneError,
  IpcRemoteError,
  IpcTimeoutError,
  type MethodMap,
  type NoticeMap,
} from '../../shared/ipc/index.js';
import { channelPair } from '../support/fakes/memory-channel.js';

interface Methods extends MethodMap {
  add: { params: { a: number; b: number }; result: number };
  slow: { params: { ms: number }; result: string };
  fail: { params: null; result: null };
  never: { params: null; result: null };
}
interface Notices extends NoticeMap {
  tick: { n: number };
}

type Side = IpcEndpoint<Methods, Methods, Notices, Notices>;

function pair(timeoutMs = 200): { client: Side; server: Side; cut(): void } {
  const ch = channelPair();
  const client: Side = new IpcEndpoint(ch.a, timeoutMs);
  const server: Side = new IpcEndpoint(ch.b, timeoutMs);
  server.handle('add', ({ a, b }) => a + b);
  server.handle('slow', ({ ms }) => new Promise((r) => setTimeout(() => r(`after ${ms}`), ms)));
  server.handle('fail', () => {
    const e = new Error('not bootstrapped') as Error & { code: string };
    e.code = 'NotBootstrapped';
    throw e;
  });
  server.handle('never', () => new Promise<null>(() => undefined));
  return { client, server, cut: ch.cut };
}

describe('IPC endpoint', () => {
  it('answers a request with its result', async () => {
    const { client } = pair();
    expect(await client.request('add', { a: 2, b: 3 })).to.equal(5);
  });

  it('keeps concurrent requests apart by id', async () => {
    const { client } = pair(1000);
    const results = await Promise.all([
      client.request('slow', { ms: 30 }),
      client.request('add', { a: 1, b: 1 }),
      client.request('slow', { ms: 5 }),
    ]);
    expect(results).to.deep.equal(['after 30', 2, 'after 5']);
  });

  it('rejects with a typed timeout when no answer comes', async () => {
    const { client } = pair(50);
    const started = Date.now();
    try {
      await client.request('never', null);
      expect.fail('should time out');
    } catch (e) {
      expect(e).to.be.instanceOf(IpcTimeoutError);
      expect((e as IpcTimeoutError).method).to.equal('never');
      // It waited for its deadline (a lower bound: a loaded machine only makes it later).
      expect(Date.now() - started).to.be.at.least(45);
    }
  });

  it('honours a per-request deadline', async () => {
    const { client } = pair(5000);
    try {
      await client.request('slow', { ms: 200 }, 20);
      expect.fail('should time out');
    } catch (e) {
      expect(e).to.be.instanceOf(IpcTimeoutError);
      expect((e as IpcTimeoutError).timeoutMs).to.equal(20);
    }
  });

  it('carries a remote error code back', async () => {
    const { client } = pair();
    try {
      await client.request('fail', null);
      expect.fail('should fail');
    } catch (e) {
      expect(e).to.be.instanceOf(IpcRemoteError);
      expect((e as IpcRemoteError).code).to.equal('NotBootstrapped');
      expect((e as IpcRemoteError).remoteMessage).to.equal('not bootstrapped');
    }
  });

  it('reports an unknown method as a remote error', async () => {
    const ch = channelPair();
    const client: Side = new IpcEndpoint(ch.a, 200);
    new IpcEndpoint(ch.b, 200);
    try {
      await client.request('add', { a: 1, b: 2 });
      expect.fail('should fail');
    } catch (e) {
      expect((e as IpcRemoteError).code).to.equal('IpcUnknownMethodError');
    }
  });

  it('fails pending and later requests at once when the peer is gone', async () => {
    const { client, cut } = pair(5000);
    const pending = client.request('never', null);
    cut();
    try {
      await pending;
      expect.fail('should fail');
    } catch (e) {
      expect(e).to.be.instanceOf(IpcPeerGoneError);
    }
    try {
      await client.request('add', { a: 1, b: 1 });
      expect.fail('should fail');
    } catch (e) {
      expect(e).to.be.instanceOf(IpcPeerGoneError);
    }
  });

  it('delivers notices to every listener in order', async () => {
    const { client, server } = pair();
    const seen: number[] = [];
    server.onNotice('tick', ({ n }) => seen.push(n));
    server.onNotice('tick', ({ n }) => seen.push(n * 10));
    client.notify('tick', { n: 1 });
    client.notify('tick', { n: 2 });
    await new Promise((r) => setTimeout(r, 20));
    expect(seen).to.deep.equal([1, 10, 2, 20]);
  });

  it('ignores foreign messages on the same channel', async () => {
    const ch = channelPair();
    const server: Side = new IpcEndpoint(ch.b, 200);
    server.handle('add', ({ a, b }) => a + b);
    ch.a.send({ cmd: 'NODE_SOMETHING' });
    ch.a.send('text');
    ch.a.send(null);
    const client: Side = new IpcEndpoint(ch.a, 200);
    expect(await client.request('add', { a: 4, b: 4 })).to.equal(8);
  });
});
