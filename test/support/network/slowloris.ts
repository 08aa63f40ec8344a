/**
 * Slow and oversized clients for the hostile-input tests: a connection that trickles a request
 * one byte at a time (slowloris) and reports when the server gave up on it, and a raw exchange
 * that sends arbitrary bytes and reads whatever comes back until the server closes.
 */
import net from 'node:net';

export interface SlowClientResult {
  /** From the TCP connect to the server's FIN or reset; null if the server never closed. */
  closedAfterMs: number | null;
  /** Bytes the client managed to send before the server closed. */
  sent: number;
  /** Everything the server sent. */
  received: Buffer;
}

/**
 * Connects and sends `bytes` one at a time, `intervalMs` apart (none at all when empty), until the
 * server closes the connection or `giveUpMs` passes (then the client closes it itself).
 */
export function slowClient(port: number, bytes: Buffer, intervalMs: number, giveUpMs: number): Promise<SlowClientResult> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    const chunks: Buffer[] = [];
    let connectedAt = 0;
    let sent = 0;
    let closedAfterMs: number | null = null;
    let trickle: NodeJS.Timeout | null = null;
    let done = false;
    const finish = (): void => {
      if (done) return;
      done = true;
      if (trickle) clearInterval(trickle);
      clearTimeout(giveUp);
      socket.destroy();
      resolve({ closedAfterMs, sent, received: Buffer.concat(chunks) });
    };
    const serverClosed = (): void => {
      if (closedAfterMs === null && connectedAt > 0) closedAfterMs = performance.now() - connectedAt;
      finish();
    };
    const giveUp = setTimeout(finish, giveUpMs);
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('end', serverClosed);
    socket.on('close', serverClosed);
    socket.on('error', () => undefined); // a reset: 'close' follows
    socket.once('connect', () => {
      connectedAt = performance.now();
      if (bytes.length === 0) return;
      trickle = setInterval(() => {
        if (sent >= bytes.length) {
          if (trickle) clearInterval(trickle);
          return;
        }
        socket.write(bytes.subarray(sent, sent + 1));
        sent += 1;
      }, intervalMs);
    });
  });
}

export interface RawExchangeResult {
  received: Buffer;
  /** True when the server closed the connection (FIN or reset) before the deadline. */
  closedByServer: boolean;
  elapsedMs: number;
}

/** Sends `bytes` at once, then reads until the server closes or `timeoutMs` passes. */
export function rawExchange(port: number, bytes: Buffer, timeoutMs: number, endAfterSend = false): Promise<RawExchangeResult> {
  return new Promise((resolve) => {
    const started = performance.now();
    const socket = net.connect({ host: '127.0.0.1', port });
    const chunks: Buffer[] = [];
    let done = false;
    const finish = (closedByServer: boolean): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ received: Buffer.concat(chunks), closedByServer, elapsedMs: performance.now() - started });
    };
    const timer = setTimeout(() => finish(false), timeoutMs);
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('end', () => finish(true));
    socket.on('close', () => finish(true));
    socket.on('error', () => undefined);
    socket.once('connect', () => {
      socket.write(bytes);
      if (endAfterSend) socket.end();
    });
  });
}

/** The status code of the first HTTP response in `bytes`, or null. */
export function httpStatusOf(bytes: Buffer): number | null {
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(bytes.subarray(0, 64).toString('latin1'));
  return m ? Number(m[1]) : null;
}
