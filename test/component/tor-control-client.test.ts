import { expect } from 'chai';
import { writeFile } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import { TorControlClient, type ControlClientOptions } from '../../supervisor/tor/control-client.js';
import type { TorEvent } from '../../supervisor/tor/control-events.js';
import { ControlEventTally } from '../../supervisor/tor/control-event-tally.js';
import {
  ControlArgumentError,
  ControlAuthenticationError,
  ControlCommandError,
  ControlCommandTimeoutError,
  ControlConnectionLostError,
} from '../../supervisor/tor/errors.js';
import { FakeControlServer, NO_ANSWER } from '../support/fakes/control-server.js';

const FP = '0123456789ABCDEF0123456789ABCDEF01234567';
const IDENTITY = Buffer.from(FP, 'hex').toString('base64').replace(/=+$/, '');

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected a rejection');
}

describe('tor control client (fake control port)', function () {
  this.timeout(20_000);
  let server: FakeControlServer;
  const clients: TorControlClient[] = [];

  function client(extra: Partial<ControlClientOptions> = {}): TorControlClient {
    const c = new TorControlClient({
      endpoint: { kind: 'unix', path: server.socketPath },
      cookieFile: server.cookieFile,
      events: ['STATUS_CLIENT', 'CIRC', 'STREAM'],
      commandTimeoutMs: 2_000,
      reconnectInitialDelayMs: 20,
      reconnectMaxDelayMs: 200,
      ...extra,
    });
    clients.push(c);
    return c;
  }

  beforeEach(async () => {
    server = new FakeControlServer();
    await server.start();
  });

  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close()));
    await server.stop();
  });

  it('authenticates with the cookie and subscribes to events', async () => {
    const c = client();
    await c.connect();
    expect(c.connected).to.equal(true);
    expect(server.commands).to.deep.equal([`AUTHENTICATE ${server.cookie.toString('hex')}`, 'SETEVENTS STATUS_CLIENT CIRC STREAM']);
  });

  it('fails connect() with ControlAuthenticationError on a wrong or unreadable cookie', async () => {
    await writeFile(server.cookieFile, Buffer.alloc(32, 7));
    expect(await rejection(client().connect())).to.be.instanceOf(ControlAuthenticationError);
    await writeFile(server.cookieFile, Buffer.alloc(5));
    expect(await rejection(client().connect())).to.be.instanceOf(ControlAuthenticationError);
    const missing = client({ cookieFile: `${server.cookieFile}.missing` });
    expect(await rejection(missing.connect())).to.be.instanceOf(ControlAuthenticationError);
  });

  it('fails connect() with ControlConnectionLostError when nothing listens', async () => {
    const c = client({ endpoint: { kind: 'unix', path: `${server.socketPath}.nothing` } });
    expect(await rejection(c.connect())).to.be.instanceOf(ControlConnectionLostError);
  });

  it('reads multi-line and data replies, with quoted values', async () => {
    server.handler = (line) => {
      if (line === `GETINFO version ns/id/${FP} status/bootstrap-phase`) {
        return (
          '250-version=0.4.9.11\r\n' +
          `250+ns/id/${FP}=\r\nr exit1 ${IDENTITY} 2026-11-22 05:00:00 127.0.0.11 5011 0\r\n.s stuffed\r\n.\r\n` +
          '250-status/bootstrap-phase=NOTICE BOOTSTRAP PROGRESS=100 TAG=done SUMMARY="Done \\"really\\""\r\n' +
          '250 OK\r\n'
        );
      }
      return undefined;
    };
    const c = client();
    await c.connect();
    const info = await c.getInfo(['version', `ns/id/${FP}`, 'status/bootstrap-phase']);
    expect(info.get('version')).to.equal('0.4.9.11');
    expect(info.get(`ns/id/${FP}`)).to.equal(`r exit1 ${IDENTITY} 2026-11-22 05:00:00 127.0.0.11 5011 0\ns stuffed`);
    expect(info.get('status/bootstrap-phase')).to.equal('NOTICE BOOTSTRAP PROGRESS=100 TAG=done SUMMARY="Done \\"really\\""');
  });

  it('reads GETCONF answers, default and quoted', async () => {
    server.handler = (line) =>
      line === 'GETCONF ExitNodes ExcludeExitNodes StrictNodes'
        ? '250-ExitNodes={de},{nl}\r\n250-ExcludeExitNodes\r\n250 StrictNodes="1"\r\n'
        : undefined;
    const c = client();
    await c.connect();
    expect(await c.getConf(['ExitNodes', 'ExcludeExitNodes', 'StrictNodes'])).to.deep.equal(
      new Map([
        ['ExitNodes', '{de},{nl}'],
        ['ExcludeExitNodes', undefined],
        ['StrictNodes', '1'],
      ]),
    );
  });

  it('rejects a non-2xx answer with ControlCommandError carrying the status', async () => {
    server.handler = (line) => (line.startsWith('GETINFO') ? '552 Unrecognized key "nope"\r\n' : undefined);
    const c = client();
    await c.connect();
    const error = await rejection(c.getInfo(['nope']));
    expect(error).to.be.instanceOf(ControlCommandError);
    expect((error as ControlCommandError).status).to.equal(552);
    // request() hands back the reply instead.
    expect((await c.request('GETINFO nope')).status).to.equal(552);
  });

  it('dispatches events that arrive between a command and its reply, split anywhere', async () => {
    const events: TorEvent[] = [];
    server.handler = (line, conn) => {
      if (line !== 'SIGNAL NEWNYM') return undefined;
      const raw =
        `650 CIRC 3 BUILT $${FP}~exit1 PURPOSE=GENERAL\r\n` +
        '650 STATUS_CLIENT NOTICE BOOTSTRAP PROGRESS=100 TAG=done SUMMARY="Done"\r\n' +
        '250 OK\r\n' +
        '650 STREAM 5 SUCCEEDED 3 1.2.3.4:80\r\n';
      // One byte at a time: the client must reassemble everything.
      for (const ch of raw) conn.socket.write(ch);
      return NO_ANSWER;
    };
    const c = client();
    c.on('event', (e) => events.push(e));
    await c.connect();
    await c.signal('NEWNYM');
    await server.waitFor(() => events.length === 3);
    expect(events.map((e) => e.type)).to.deep.equal(['CIRC', 'STATUS_CLIENT', 'STREAM']);
    expect(events[0]).to.deep.include({ id: '3', status: 'BUILT' });
    expect(events[2]).to.deep.include({ id: '5', circuitId: '3', status: 'SUCCEEDED' });
  });

  it('counts every event it receives by name, an unknown one too, in the tally it was given', async () => {
    const tally = new ControlEventTally();
    server.handler = (line, conn) => {
      if (line !== 'SIGNAL NEWNYM') return undefined;
      conn.socket.write(`650 CIRC 3 BUILT $${FP}~exit1 PURPOSE=GENERAL\r\n650 STREAM 5 NEW 0 1.2.3.4:80\r\n650 STREAM 5 SUCCEEDED 3 1.2.3.4:80\r\n650 NETWORK_LIVENESS UP\r\n250 OK\r\n`);
      return NO_ANSWER;
    };
    const c = client({ tally });
    await c.connect();
    await c.signal('NEWNYM');
    await server.waitFor(() => [...tally.snapshot().values()].reduce((a, b) => a + b, 0) === 4);
    expect(Object.fromEntries(tally.snapshot())).to.deep.equal({ CIRC: 1, STREAM: 2, NETWORK_LIVENESS: 1 });
  });

  it('matches pipelined commands to replies in order', async () => {
    server.handler = (line) => {
      const m = /^GETINFO n(\d+)$/.exec(line);
      return m ? `250-n${m[1]}=${Number(m[1]) * 2}\r\n250 OK\r\n` : undefined;
    };
    const c = client();
    await c.connect();
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => c.getInfo([`n${i}`])));
    answers.forEach((a, i) => expect(a.get(`n${i}`)).to.equal(String(i * 2)));
  });

  it('times out a command that never gets an answer, resets the connection and recovers', async () => {
    server.handler = (line) => (line === 'GETINFO hang' ? NO_ANSWER : line === 'GETINFO ok' ? '250-ok=1\r\n250 OK\r\n' : undefined);
    const c = client({ commandTimeoutMs: 300 });
    const connected: boolean[] = [];
    c.on('connected', ({ reconnect }) => connected.push(reconnect));
    await c.connect();
    const started = Date.now();
    const error = await rejection(c.getInfo(['hang']));
    expect(error).to.be.instanceOf(ControlCommandTimeoutError);
    expect((error as ControlCommandTimeoutError).timeoutMs).to.equal(300);
    expect(Date.now() - started, 'not before its deadline').to.be.at.least(250);
    // The next command is answered on a fresh, re-subscribed connection.
    expect((await c.getInfo(['ok'])).get('ok')).to.equal('1');
    expect(server.connectionCount).to.equal(2);
    expect(server.commands.filter((l) => l.startsWith('SETEVENTS'))).to.have.length(2);
    expect(connected).to.deep.equal([false, true]);
  });

  it('fails in-flight commands on connection loss, reconnects with backoff and runs queued ones', async () => {
    let hold = true;
    server.handler = (line) => {
      if (line === 'GETINFO slow') return hold ? NO_ANSWER : '250-slow=1\r\n250 OK\r\n';
      if (line === 'GETINFO later') return '250-later=2\r\n250 OK\r\n';
      return undefined;
    };
    const c = client({ commandTimeoutMs: 5_000 });
    const disconnects: boolean[] = [];
    c.on('disconnected', ({ willReconnect }) => disconnects.push(willReconnect));
    await c.connect();
    const inflight = c.getInfo(['slow']);
    await server.waitFor(() => server.commands.includes('GETINFO slow'));
    server.dropConnections();
    expect(await rejection(inflight)).to.be.instanceOf(ControlConnectionLostError);
    expect(disconnects).to.deep.equal([true]);
    // Issued while disconnected: queued and sent after re-authentication.
    const later = c.getInfo(['later']);
    expect((await later).get('later')).to.equal('2');
    expect(c.connected).to.equal(true);
    expect(server.commands.filter((l) => l.startsWith('AUTHENTICATE'))).to.have.length(2);
    expect(server.commands.filter((l) => l.startsWith('SETEVENTS'))).to.have.length(2);
    hold = false;
  });

  it('keeps retrying while the control port is down and reconnects when it is back', async () => {
    const c = client();
    const connected: boolean[] = [];
    c.on('connected', ({ reconnect }) => connected.push(reconnect));
    await c.connect();
    const dir = server.directory;
    await server.stop({ keepFiles: true });
    await new Promise((r) => setTimeout(r, 300)); // several failed attempts with backoff
    expect(c.connected).to.equal(false);
    const revived = new FakeControlServer();
    revived.cookie = server.cookie;
    await revived.start(dir);
    server = revived;
    await server.waitFor(() => c.connected);
    expect(connected).to.deep.equal([false, true]);
    expect(server.commands).to.deep.equal([`AUTHENTICATE ${server.cookie.toString('hex')}`, 'SETEVENTS STATUS_CLIENT CIRC STREAM']);
  });

  it('stops reconnecting when shouldReconnect says tor is gone, failing queued commands', async () => {
    let alive = true;
    const c = client({ shouldReconnect: () => alive });
    const disconnects: boolean[] = [];
    c.on('disconnected', ({ willReconnect }) => disconnects.push(willReconnect));
    await c.connect();
    alive = false;
    server.dropConnections();
    await server.waitFor(() => disconnects.length === 1);
    expect(disconnects).to.deep.equal([false]);
    expect(await rejection(c.getInfo(['x']))).to.be.instanceOf(ControlConnectionLostError);
    await new Promise((r) => setTimeout(r, 100));
    expect(server.connectionCount).to.equal(1);
  });

  it('resets the connection on a protocol error and reconnects', async () => {
    server.handler = (line, conn) => {
      if (line === 'GETINFO garbage') {
        conn.socket.write('this is not a reply\r\n');
        return NO_ANSWER;
      }
      return line === 'GETINFO fine' ? '250-fine=yes\r\n250 OK\r\n' : undefined;
    };
    const c = client();
    const errors: Error[] = [];
    c.on('protocol-error', (e) => errors.push(e));
    await c.connect();
    expect(await rejection(c.getInfo(['garbage']))).to.be.instanceOf(ControlConnectionLostError);
    expect(errors).to.have.length(1);
    expect((await c.getInfo(['fine'])).get('fine')).to.equal('yes');
  });

  it('refuses command text that could inject a second command', async () => {
    const c = client();
    await c.connect();
    expect(await rejection(c.request('GETINFO version\r\nSIGNAL HALT'))).to.be.instanceOf(ControlArgumentError);
    expect(await rejection(c.getInfo(['a b']))).to.be.instanceOf(ControlArgumentError);
    expect(await rejection(c.closeCircuit('1; x'))).to.be.instanceOf(ControlArgumentError);
    expect(server.commands.some((l) => l.includes('HALT'))).to.equal(false);
  });

  it('quotes SETCONF values and resets options given an empty value', async () => {
    const c = client();
    server.handler = (line) => (line.startsWith('SETCONF') ? '250 OK\r\n' : undefined);
    await c.connect();
    await c.setConf([
      ['ExitNodes', `$${FP}`],
      ['StrictNodes', '1'],
      ['ExcludeExitNodes', ''],
    ]);
    expect(server.commands).to.include(`SETCONF ExitNodes="$${FP}" StrictNodes="1" ExcludeExitNodes`);
  });

  it('close() fails pending commands, stops reconnecting and is idempotent', async () => {
    server.handler = (line) => (line === 'GETINFO hang' ? NO_ANSWER : undefined);
    const c = client({ commandTimeoutMs: 10_000 });
    await c.connect();
    const pending = c.getInfo(['hang']);
    await server.waitFor(() => server.commands.includes('GETINFO hang'));
    await c.close();
    await c.close();
    expect(await rejection(pending)).to.be.instanceOf(ControlConnectionLostError);
    expect(await rejection(c.getInfo(['x']))).to.be.instanceOf(ControlConnectionLostError);
    await new Promise((r) => setTimeout(r, 100));
    expect(server.connectionCount).to.equal(1);
    expect(c.closed).to.equal(true);
  });

  it('works over a TCP control port on 127.0.0.1', async () => {
    const tcp = createServer((socket) => {
      socket.on('data', (chunk) => {
        for (const line of chunk.toString().split('\r\n').filter(Boolean)) {
          socket.write(line.startsWith('GETINFO') ? '250-version=tcp\r\n250 OK\r\n' : '250 OK\r\n');
        }
      });
    });
    await new Promise<void>((r) => tcp.listen(0, '127.0.0.1', r));
    try {
      const c = client({ endpoint: { kind: 'tcp', port: (tcp.address() as AddressInfo).port } });
      await c.connect();
      expect((await c.getInfo(['version'])).get('version')).to.equal('tcp');
      await c.close();
    } finally {
      await new Promise<void>((r) => tcp.close(() => r()));
    }
  });
});
