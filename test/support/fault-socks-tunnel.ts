/**
 * A lean SOCKS5 client (RFC 1928 with RFC 1929 credentials) for the fault and load tests: one
 * data handler and a small state machine per connection, so ten thousand tunnels cost little in
 * the test process. Every step waits for the server's answer; the outcome says which step ended
 * the exchange and how, so refusals are told apart from hangs and resets.
 */
import net from 'node:net';

export interface SocksTunnelOptions {
  port: number;
  /** null offers only "no authentication". Usernames and passwords are raw bytes on the wire. */
  username: Buffer | string | null;
  password: Buffer | string | null;
  host: string;
  targetPort: number;
  /** Whole-handshake deadline on the client side. */
  timeoutMs: number;
}

export type SocksStep = 'connect-tcp' | 'method' | 'auth' | 'request';

export type TunnelOutcome =
  | { kind: 'open'; socket: net.Socket; elapsedMs: number }
  /** The server answered a step with a refusal (method 0xFF, auth status, CONNECT reply code). */
  | { kind: 'refused'; step: SocksStep; code: number; elapsedMs: number }
  /** The server closed or reset the connection before answering `step`. */
  | { kind: 'closed'; step: SocksStep; elapsedMs: number }
  /** The client-side deadline passed while waiting for `step`. */
  | { kind: 'timeout'; step: SocksStep; elapsedMs: number };

const asBuffer = (v: Buffer | string): Buffer => (typeof v === 'string' ? Buffer.from(v, 'utf8') : v);

function requestBytes(host: string, port: number): Buffer {
  const p = Buffer.alloc(2);
  p.writeUInt16BE(port);
  if (net.isIPv4(host)) return Buffer.concat([Buffer.from([5, 1, 0, 1]), Buffer.from(host.split('.').map(Number)), p]);
  const name = Buffer.from(host, 'latin1');
  return Buffer.concat([Buffer.from([5, 1, 0, 3, name.length]), name, p]);
}

export function openSocksTunnel(o: SocksTunnelOptions): Promise<TunnelOutcome> {
  return new Promise((resolve) => {
    const started = performance.now();
    const elapsed = (): number => performance.now() - started;
    const socket = net.connect({ host: '127.0.0.1', port: o.port });
    let step: SocksStep = 'connect-tcp';
    let buf: Buffer = Buffer.alloc(0);
    let done = false;
    const finish = (outcome: TunnelOutcome): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('close', onClose);
      socket.off('error', onError);
      if (outcome.kind !== 'open') socket.destroy();
      else socket.on('error', () => undefined); // the caller adds its own handlers; never crash on a late reset
      resolve(outcome);
    };
    const timer = setTimeout(() => finish({ kind: 'timeout', step, elapsedMs: elapsed() }), o.timeoutMs);
    const onClose = (): void => finish({ kind: 'closed', step, elapsedMs: elapsed() });
    const onError = (): void => undefined; // 'close' follows
    const onData = (chunk: Buffer): void => {
      buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
      for (;;) {
        if (step === 'method') {
          if (buf.length < 2) return;
          const method = buf[1] as number;
          buf = buf.subarray(2);
          if (method === 0xff) return finish({ kind: 'refused', step, code: method, elapsedMs: elapsed() });
          if (method === 0x02) {
            const u = asBuffer(o.username ?? '');
            const p = asBuffer(o.password ?? '');
            socket.write(Buffer.concat([Buffer.from([1, u.length]), u, Buffer.from([p.length]), p]));
            step = 'auth';
          } else {
            socket.write(requestBytes(o.host, o.targetPort));
            step = 'request';
          }
          continue;
        }
        if (step === 'auth') {
          if (buf.length < 2) return;
          const status = buf[1] as number;
          buf = buf.subarray(2);
          if (status !== 0) return finish({ kind: 'refused', step, code: status, elapsedMs: elapsed() });
          socket.write(requestBytes(o.host, o.targetPort));
          step = 'request';
          continue;
        }
        if (step === 'request') {
          if (buf.length < 5) return;
          const atyp = buf[3];
          const addr = atyp === 1 ? 4 : atyp === 4 ? 16 : 1 + (buf[4] as number);
          if (buf.length < 4 + addr + 2) return;
          const code = buf[1] as number;
          const rest = buf.subarray(4 + addr + 2);
          if (code !== 0) return finish({ kind: 'refused', step, code, elapsedMs: elapsed() });
          finish({ kind: 'open', socket, elapsedMs: elapsed() });
          if (rest.length > 0) socket.unshift(rest);
          return;
        }
        return;
      }
    };
    socket.on('data', onData);
    socket.on('close', onClose);
    socket.on('error', onError);
    socket.once('connect', () => {
      step = 'method';
      socket.write(Buffer.from(o.username === null ? [5, 1, 0] : [5, 1, 2]));
    });
  });
}

/** Writes `payload` and resolves once as many bytes came back (an echo); rejects on close or deadline. */
export function echoRoundTrip(socket: net.Socket, payload: Buffer, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    let got = 0;
    const cleanup = (): void => {
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('close', onClose);
    };
    const onData = (chunk: Buffer): void => {
      got += chunk.length;
      if (got >= payload.length) {
        cleanup();
        resolve();
      }
    };
    const onClose = (): void => {
      cleanup();
      reject(new Error(`tunnel closed after ${got} of ${payload.length} echoed bytes`));
    };
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`echo of ${payload.length} bytes not complete within ${timeoutMs} ms (${got} back)`));
    }, timeoutMs);
    socket.on('data', onData);
    socket.on('close', onClose);
    socket.write(payload);
  });
}

/** One HTTP/1.1 GET (Connection: close) through an open tunnel; resolves with the status and body. */
export function httpGetOverTunnel(socket: net.Socket, host: string, path: string, timeoutMs: number): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no complete HTTP response within ${timeoutMs} ms`));
    }, timeoutMs);
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.once('close', () => {
      clearTimeout(timer);
      const text = Buffer.concat(chunks).toString('utf8');
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(text);
      const split = text.indexOf('\r\n\r\n');
      if (!m || split < 0) reject(new Error(`malformed or missing HTTP response (${text.length} bytes)`));
      else resolve({ status: Number(m[1]), body: text.slice(split + 4) });
    });
    socket.write(`GET ${path} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
  });
}
