/**
 * A proxy worker's start-up warm-up: before it listens, the worker sends `connections` SOCKS5
 * connections through its own proxy path (a Socks5ProxyServer with a LeasedRouter, the token
 * check, the accounting batch, the tunnel) to a stand-in instance on loopback inside the worker,
 * then closes everything and keeps nothing but the code V8 has compiled on the way.
 *
 * Why: a worker that has not yet run its hot path runs it in the interpreter, compiling as it
 * goes, and the first clients of a freshly started service pay for it. Measured (BENCH=cold-burst,
 * docs/performance.md "A fresh service's first burst"): with it, the workers spend less CPU over a
 * fresh service's first burst of 200 connections, but the time that burst adds at the median is
 * not measurably smaller: most of it has other causes. The tors bootstrap for seconds meanwhile,
 * so the warm-up costs no time to a service's first request, only the CPU it uses.
 *
 * Nothing of it reaches the supervisor: its routes are granted by a local stand-in, its
 * accounting batch is thrown away, and its token is made up for it.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Logger } from '../../shared/logger.js';
import { errorMessage } from '../../shared/errors/error-message.js';
import { digestTokenSecret, TOKEN_PREFIX } from '../../shared/auth/token-format.js';
import { ConnectionBudget } from '../proxy/connection-budget.js';
import { InstanceDownSignal } from '../proxy/instance-down.js';
import { Socks5ProxyServer } from '../proxy/socks5-server.js';
import { AuthMethod, encodeGreeting, encodeMethodSelection, encodeRequest, encodeUserPasswordRequest, REPLY_SUCCEEDED } from '../proxy/socks5-protocol.js';
import { ThrottledWarning } from '../../shared/logging/throttled-warning.js';
import { AccountingBatch } from './accounting-batch.js';
import { LeasedRouter } from './leased-router.js';
import { ProxyCredentials } from './proxy-credentials.js';

/** Connections in flight at once during the warm-up. */
const WARM_UP_CONCURRENCY = 16;
/** The warm-up stops after this long whatever is left (a busy machine must not delay a start by much). */
export const WARM_UP_MAX_MS = 3_000;
/** Each warm-up connection gives up after this long. */
const WARM_UP_CONNECTION_TIMEOUT_MS = 2_000;
/** The target a warm-up connection names: never resolved, the stand-in instance answers it. */
const WARM_UP_HOST = 'warm-up.invalid';

export interface WarmUpResult {
  /** Connections that went all the way through (tunnel up, a request and its answer relayed). */
  completed: number;
  ms: number;
}

/**
 * Runs `connections` connections through the proxy path (at most WARM_UP_MAX_MS). Never throws:
 * a warm-up that fails is logged and the worker starts anyway, only colder.
 */
export async function warmUpProxyPath(connections: number, log: Logger, maxMs = WARM_UP_MAX_MS): Promise<WarmUpResult> {
  const started = performance.now();
  if (connections <= 0) return { completed: 0, ms: 0 };
  const instance = await startStandInInstance();
  const token = `${TOKEN_PREFIX}${randomBytes(16).toString('hex')}`;
  const credentials = new ProxyCredentials(false, null);
  credentials.install({ version: 1, authDisabled: false, tokens: [{ id: 'warm-up', scope: 'proxy', digest: digestTokenSecret(token) }] });
  const batch = new AccountingBatch(0);
  let session = 0;
  const router = new LeasedRouter({
    ask: (params) => Promise.resolve({ ok: true, instance: 0, host: '127.0.0.1', port: 0, path: instance.path, key: params.key, session: ++session, lease: params.key !== null, exitIp: '' }),
    defaultSession: 'ip',
    usernameParams: true,
    sessionTtlMaxMs: 86_400_000,
    onBadUsername: () => undefined,
    onRoundTrip: (ms) => batch.noteRoundTrip(ms),
    log,
  });
  const quiet = new ThrottledWarning(log, 'warm-up refusals');
  const server = new Socks5ProxyServer({
    router,
    events: batch.events,
    credentials: credentials.policy(),
    log,
    budget: new ConnectionBudget(WARM_UP_CONCURRENCY * 4, log),
    instanceDown: new InstanceDownSignal(),
    credentialRefusals: quiet,
  });
  let completed = 0;
  try {
    const { port } = await server.listen(0, '127.0.0.1');
    const deadline = started + maxMs;
    let next = 0;
    await Promise.all(
      Array.from({ length: WARM_UP_CONCURRENCY }, async (_, lane) => {
        while (next < connections && performance.now() < deadline) {
          next++;
          // A few sessions, each leased after its first connection, as a client fleet's would be.
          if (await oneConnection(port, `warm-up-${lane % 4}`, token)) completed++;
          if (next % 64 === 0) router.takeOpened();
        }
      }),
    );
  } catch (e) {
    log.warn('proxy warm-up failed; the worker starts without it', { error: errorMessage(e) });
  } finally {
    router.takeOpened();
    batch.take();
    await server.close();
    await instance.close();
  }
  return { completed, ms: performance.now() - started };
}

/** One client connection: greeting, credentials, CONNECT, a request, its answer, close. */
function oneConnection(port: number, username: string, password: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port, noDelay: true });
    let step = 0;
    const done = (ok: boolean): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(ok);
    };
    const timer = setTimeout(() => done(false), WARM_UP_CONNECTION_TIMEOUT_MS);
    socket.on('error', () => done(false));
    socket.on('close', () => done(false));
    socket.on('connect', () => socket.write(encodeGreeting([AuthMethod.UsernamePassword])));
    socket.on('data', (chunk: Buffer) => {
      // Loopback delivers each of the proxy's replies in one piece; anything else ends the connection.
      if (step === 0 && chunk.length === 2 && chunk[1] === 2) {
        step = 1;
        socket.write(encodeUserPasswordRequest(username, password));
      } else if (step === 1 && chunk.length === 2 && chunk[1] === 0) {
        step = 2;
        socket.write(encodeRequest('connect', { type: 'domain', host: WARM_UP_HOST, port: 80 }));
      } else if (step === 2 && chunk.length >= 10 && chunk[1] === 0) {
        step = 3;
        socket.write('GET / HTTP/1.1\r\nHost: warm-up.invalid\r\nConnection: close\r\n\r\n');
        if (chunk.length > 10) done(true);
      } else if (step === 3) {
        done(true);
      } else {
        done(false);
      }
    });
  });
}

/**
 * A stand-in for a tor SocksPort, on a Unix socket as the instances' are: answers the greeting
 * and the CONNECT in one write, then answers any request and closes.
 */
async function startStandInInstance(): Promise<{ path: string; close(): Promise<void> }> {
  const socketPath = path.join(os.tmpdir(), `exitpool-warm-up-${process.pid}-${randomBytes(4).toString('hex')}.sock`);
  const REPLIES = Buffer.concat([encodeMethodSelection(AuthMethod.NoAuthentication), REPLY_SUCCEEDED]);
  const ANSWER = Buffer.from('HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n');
  const sockets = new Set<net.Socket>();
  const server = net.createServer({ allowHalfOpen: true, noDelay: true }, (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    let answered = false;
    socket.on('data', () => {
      if (!answered) {
        // The proxy's greeting and CONNECT come in one write.
        answered = true;
        socket.write(REPLIES);
        return;
      }
      socket.end(ANSWER);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, () => resolve());
  });
  return {
    path: socketPath,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => {
          fs.rmSync(socketPath, { force: true });
          resolve();
        });
      }),
  };
}
