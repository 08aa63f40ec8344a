/**
 * The dialler towards a tor SocksPort, against scripted servers that misbehave on cue.
 */
import { expect } from 'chai';
import net from 'node:net';
import { SocksDialError, Socks5Upstream, dialSocks5 } from '../../workers/proxy/socks5-client.js';

type Script = (socket: net.Socket, received: Buffer[]) => void;

/** A server that hands every connection to `script`, recording what the client sent. */
async function scriptedServer(script: Script): Promise<{ port: number; received: Buffer[]; close(): void }> {
  const received: Buffer[] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.on('data', (chunk: Buffer) => received.push(chunk));
    script(socket, received);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    received,
    close: () => {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
}

/** Byte length of the complete greeting (stage 0) or CONNECT request (stage 1) at the start of buf, or 0. */
function messageLength(buf: Buffer, stage: number): number {
  if (stage === 0) return buf.length >= 2 && buf.length >= 2 + buf[1]! ? 2 + buf[1]! : 0;
  if (buf.length < 5) return 0;
  const length = buf[3] === 1 ? 10 : buf[3] === 4 ? 22 : 7 + buf[4]!;
  return buf.length >= length ? length : 0;
}

/**
 * Calls `answer(stage)` for each complete client message: 0 for the greeting, 1 for the
 * CONNECT request, however the client splits or joins them (the dialler pipelines both).
 */
function perMessage(socket: net.Socket, answer: (stage: number) => void): void {
  let buf = Buffer.alloc(0);
  let stage = 0;
  socket.on('data', (chunk: Buffer) => {
    buf = Buffer.concat([buf, chunk]);
    for (let n = messageLength(buf, stage); stage < 2 && n > 0; n = messageLength(buf, stage)) {
      buf = buf.subarray(n);
      answer(stage++);
    }
  });
}

/** Answers the greeting with `selection`, then the request with `reply` (+ optional early data). */
function answering(selection: number[], reply: number[] | null, early = ''): Script {
  return (socket) => {
    perMessage(socket, (stage) => {
      if (stage === 0) socket.write(Buffer.from(selection));
      else if (reply !== null) socket.write(Buffer.concat([Buffer.from(reply), Buffer.from(early)]));
    });
  };
}

async function dialError(promise: Promise<unknown>): Promise<SocksDialError> {
  try {
    await promise;
  } catch (error) {
    expect(error).to.be.instanceOf(SocksDialError);
    return error as SocksDialError;
  }
  throw new Error('expected the dial to fail');
}

const target = { type: 'domain' as const, host: 'example.com', port: 443 };

describe('proxy: SOCKS5 dialler (component)', () => {
  const servers: Array<{ close(): void }> = [];
  afterEach(() => {
    for (const server of servers.splice(0)) server.close();
  });

  async function server(script: Script): Promise<{ port: number; received: Buffer[] }> {
    const s = await scriptedServer(script);
    servers.push(s);
    return s;
  }

  it('offers only "no authentication", passes the name through, and keeps data sent right after the reply', async () => {
    const s = await server(answering([5, 0], [5, 0, 0, 1, 0, 0, 0, 0, 0, 0], 'early bytes'));
    const dialed = await dialSocks5({ host: '127.0.0.1', port: s.port, target, timeoutMs: 2000 });
    // Greeting and CONNECT, pipelined.
    expect([...Buffer.concat(s.received)]).to.deep.equal([5, 1, 0, 5, 1, 0, 3, 11, ...Buffer.from('example.com'), 1, 187]);
    const early = await new Promise<Buffer>((resolve) => dialed.socket.once('data', resolve).resume());
    expect(early.toString()).to.equal('early bytes');
    expect(dialed.socket.bytesRead - dialed.readBase).to.equal('early bytes'.length);
    expect(dialed.socket.bytesWritten - dialed.writeBase).to.equal(0);
    dialed.socket.destroy();
  });

  it('writes nothing on a connection opened ahead of its target, then greeting and CONNECT in one write', async () => {
    const s = await server(answering([5, 0], [5, 0, 0, 1, 0, 0, 0, 0, 0, 0]));
    const upstream = new Socks5Upstream({ host: '127.0.0.1', port: s.port });
    // Connected and idle: the server has seen no byte.
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(s.received).to.have.length(0);
    const dialed = await upstream.connect(target, 2000);
    expect(s.received.map((chunk) => [...chunk])).to.deep.equal([[5, 1, 0, 5, 1, 0, 3, 11, ...Buffer.from('example.com'), 1, 187]]);
    dialed.socket.destroy();
  });

  it('refuses a server that speaks before it is greeted', async () => {
    const s = await server((socket) => socket.write(Buffer.from([5, 0])));
    const upstream = new Socks5Upstream({ host: '127.0.0.1', port: s.port });
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await dialError(upstream.connect(target, 2000))).to.deep.include({ kind: 'protocol', phase: 'negotiating' });
  });

  it('handles replies that arrive one byte at a time, with an IPv6 bound address', async () => {
    const s = await server((socket) => {
      // Both answers, one byte at a time, once the request is complete.
      perMessage(socket, async (stage) => {
        if (stage === 0) return;
        for (const byte of [5, 0, 5, 0, 0, 4, ...new Array<number>(15).fill(0), 1, 0, 80]) {
          socket.write(Buffer.from([byte]));
          await new Promise((resolve) => setTimeout(resolve, 1));
        }
      });
    });
    const dialed = await dialSocks5({ host: '127.0.0.1', port: s.port, target, timeoutMs: 2000 });
    dialed.socket.destroy();
  });

  it("reports tor's reply code in a typed refusal", async () => {
    for (const code of [1, 4, 5, 6, 0xf6]) {
      const s = await server(answering([5, 0], [5, code, 0, 1, 0, 0, 0, 0, 0, 0]));
      const error = await dialError(dialSocks5({ host: '127.0.0.1', port: s.port, target, timeoutMs: 2000 }));
      expect(error).to.deep.include({ kind: 'refused', replyCode: code, phase: 'awaiting-reply' });
    }
  });

  it('refuses a server that demands authentication or does not speak SOCKS5', async () => {
    const demandsAuth = await server(answering([5, 2], null));
    expect((await dialError(dialSocks5({ host: '127.0.0.1', port: demandsAuth.port, target, timeoutMs: 2000 }))).kind).to.equal('protocol');
    const http = await server((socket) => socket.once('data', () => socket.write('HTTP/1.1 400 Bad Request\r\n\r\n')));
    expect((await dialError(dialSocks5({ host: '127.0.0.1', port: http.port, target, timeoutMs: 2000 }))).kind).to.equal('protocol');
  });

  it('reports a hang-up during the handshake, an unreachable port, a deadline and an abort', async () => {
    const hangsUp = await server((socket) => socket.once('data', () => socket.end()));
    expect(await dialError(dialSocks5({ host: '127.0.0.1', port: hangsUp.port, target, timeoutMs: 2000 }))).to.deep.include({ kind: 'closed', phase: 'negotiating' });

    const unused = await server(() => undefined);
    servers.pop()!.close();
    await new Promise((resolve) => setTimeout(resolve, 20));
    const refused = await dialError(dialSocks5({ host: '127.0.0.1', port: unused.port, target, timeoutMs: 2000 }));
    expect(refused).to.deep.include({ kind: 'connect', phase: 'connecting', socketErrorCode: 'ECONNREFUSED' });

    const silent = await server(answering([5, 0], null));
    const started = Date.now();
    const timedOut = await dialError(dialSocks5({ host: '127.0.0.1', port: silent.port, target, timeoutMs: 200 }));
    expect(timedOut).to.deep.include({ kind: 'timeout', phase: 'awaiting-reply' });
    expect(Date.now() - started, 'not before the deadline').to.be.at.least(150);

    const controller = new AbortController();
    const pending = dialSocks5({ host: '127.0.0.1', port: silent.port, target, timeoutMs: 5000, signal: controller.signal });
    setTimeout(() => controller.abort(), 50);
    expect((await dialError(pending)).kind).to.equal('aborted');
  });
});
