import { expect } from 'chai';
import { ERROR_CODES, ExitpoolError, isErrorCode, type ErrorCode } from '../../shared/errors/catalogue.js';
import { IpcEndpoint, IpcRemoteError, IpcTimeoutError, type IpcHandlers, type MethodMap, type NoticeMap } from '../../shared/ipc/index.js';
import { WORKER_REQUEST_TIMEOUTS_MS } from '../../shared/ipc/protocol.js';
import { HTTP_STATUS_OF, httpErrorOfCatalogued } from '../../workers/api/error-status.js';
import { channelPair } from '../support/fakes/memory-channel.js';

interface Methods extends MethodMap {
  refuse: { params: { code: ErrorCode }; result: null };
  crash: { params: null; result: null };
}
type Side = IpcEndpoint<Methods, Methods, NoticeMap, NoticeMap>;

function pair(): { client: Side; server: Side } {
  const ch = channelPair();
  const client: Side = new IpcEndpoint(ch.a, 500);
  const server: Side = new IpcEndpoint(ch.b, 500);
  server.handleAll({
    refuse: ({ code }) => {
      throw new ExitpoolError(code, `refused with ${code}`);
    },
    crash: () => {
      throw new TypeError('a bug, not a refusal');
    },
  });
  return { client, server };
}

describe('error catalogue', () => {
  it('gives every code an HTTP status in the one table, and only codes of the catalogue', () => {
    expect(Object.keys(HTTP_STATUS_OF).sort()).to.deep.equal(Object.keys(ERROR_CODES).sort());
    for (const status of Object.values(HTTP_STATUS_OF)) expect(status).to.be.within(400, 599);
    expect(isErrorCode('EXITPOOL_NO_SUCH_SESSION')).to.equal(true);
    for (const hostile of ['toString', '__proto__', 'constructor', 'IpcTimeoutError', '', 'exitpool_no_such_session']) {
      expect(isErrorCode(hostile), hostile).to.equal(false);
    }
  });

  it('carries a code across IPC, and the API maps it to the status of the table with the message', async () => {
    const { client } = pair();
    for (const code of Object.keys(ERROR_CODES) as ErrorCode[]) {
      const error = await client.request('refuse', { code }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).to.be.instanceOf(IpcRemoteError);
      expect((error as IpcRemoteError).code).to.equal(code);
      const http = httpErrorOfCatalogued(error);
      expect(http?.status, code).to.equal(HTTP_STATUS_OF[code]);
      expect(http?.message).to.equal(`refused with ${code}`);
    }
  });

  it('leaves anything that is not a catalogue error to the generic handler (a bug is a 500 without its message)', async () => {
    const { client } = pair();
    const error = await client.request('crash', null).catch((e: unknown) => e);
    expect(error).to.be.instanceOf(IpcRemoteError);
    expect(httpErrorOfCatalogued(error)).to.equal(undefined);
    expect(httpErrorOfCatalogued(new Error('plain'))).to.equal(undefined);
    expect(httpErrorOfCatalogued(new ExitpoolError('EXITPOOL_NO_SUCH_TOKEN', 'no such token'))?.status).to.equal(404);
  });

  it('types the handler table against the protocol: a missing method does not compile', () => {
    // @ts-expect-error: 'crash' has no handler
    const incomplete: IpcHandlers<Methods> = { refuse: () => null };
    expect(Object.keys(incomplete)).to.deep.equal(['refuse']);
  });

  it('applies the per-method deadlines defined beside the protocol', async () => {
    for (const [method, ms] of Object.entries(WORKER_REQUEST_TIMEOUTS_MS)) {
      expect(ms, method).to.be.a('number').and.to.be.greaterThan(0);
    }
    const ch = channelPair();
    const client: Side = new IpcEndpoint(ch.a, 5_000, { crash: 50 });
    const server: Side = new IpcEndpoint(ch.b, 5_000);
    server.handle('crash', () => new Promise<null>(() => undefined));
    const error = await client.request('crash', null).catch((e: unknown) => e);
    expect(error).to.be.instanceOf(IpcTimeoutError);
    expect((error as IpcTimeoutError).timeoutMs).to.equal(50);
  });
});
