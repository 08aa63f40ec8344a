/**
 * The tests' and the benchmarks' one SOCKS5 client (RFC 1928 with RFC 1929 credentials), written
 * from the RFCs apart from workers/proxy so the listener is checked by a second implementation.
 * It behaves like curl: one round trip per step (greeting, credentials when offered, CONNECT),
 * each sent only after the previous answer, so a measured setup holds every round trip a real
 * client pays. One data handler and a small state machine per connection, so ten thousand
 * tunnels cost little in the test process. The outcome names the step that ended the exchange
 * and how, so refusals are told apart from hangs and resets.
 */
import net from 'node:net';

export interface SocksTunnelOptions {
  /** The proxy: a TCP port on proxyHost (default 127.0.0.1), or a Unix-socket listener. */
  port?: number;
  proxyHost?: string;
  proxyPath?: string;
  /** Source address of the TCP connection (any 127.0.0.x works on loopback). */
  localAddress?: string;
  /** null or absent offers only "no authentication". Usernames and passwords are raw bytes on the wire. */
  username?: Buffer | string | null;
  password?: Buffer | string | null;
  /** IPv4 literal or a domain name (sent as a domain, never resolved here). */
  host: string;
  targetPort: number;
  /** Whole-handshake deadline on the client side (default DEFAULT_HANDSHAKE_TIMEOUT_MS). */
  timeoutMs?: number;
}

export const DEFAULT_HANDSHAKE_TIMEOUT_MS = 10_000;

/** A username and password as the benchmarks and fixtures hand them around; spread into the options. */
export interface SocksCredentials {
  username: string;
  password: string;
}

export type SocksStep = 'connect-tcp' | 'method' | 'auth' | 'request';

/** The setup of an open tunnel split by step, in ms: TCP connect, greeting, credentials (0 without), CONNECT. */
export interface SetupSteps {
  connectMs: number;
  greetingMs: number;
  credentialsMs: number;
  connectRequestMs: number;
}

export type TunnelOutcome =
  /** `socket` is ready for payload; the caller owns (and must end) it. */
  | { kind: 'open'; socket: net.Socket; elapsedMs: number; steps: SetupSteps }
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

/** The whole exchange; never rejects (every ending is an outcome). */
export function openSocksTunnel(o: SocksTunnelOptions): Promise<TunnelOutcome> {
  return new Promise((resolve) => {
    const started = performance.now();
    const elapsed = (): number => performance.now() - started;
    const marks = { connected: 0, method: 0, auth: 0 };
    const socket =
      o.proxyPath !== undefined
        ? net.connect({ path: o.proxyPath })
        : net.connect({ host: o.proxyHost ?? '127.0.0.1', port: o.port ?? 0, noDelay: true, ...(o.localAddress ? { localAddress: o.localAddress } : {}) });
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
      if (outcome.kind !== 'open') {
        socket.destroy();
      } else {
        socket.on('error', () => undefined); // the caller adds its own handlers; never crash on a late reset
      }
      resolve(outcome);
    };
    const timer = setTimeout(() => finish({ kind: 'timeout', step, elapsedMs: elapsed() }), o.timeoutMs ?? DEFAULT_HANDSHAKE_TIMEOUT_MS);
    const onClose = (): void => finish({ kind: 'closed', step, elapsedMs: elapsed() });
    const onError = (): void => undefined; // 'close' follows
    const sendRequest = (): void => {
      socket.write(requestBytes(o.host, o.targetPort));
      step = 'request';
    };
    const onData = (chunk: Buffer): void => {
      buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
      for (;;) {
        if (step === 'method') {
          if (buf.length < 2) return;
          marks.method = performance.now();
          const method = buf[1] as number;
          buf = buf.subarray(2);
          if (method === 0xff) return finish({ kind: 'refused', step, code: method, elapsedMs: elapsed() });
          if (method === 0x02) {
            const u = asBuffer(o.username ?? '');
            const p = asBuffer(o.password ?? '');
            socket.write(Buffer.concat([Buffer.from([1, u.length]), u, Buffer.from([p.length]), p]));
            step = 'auth';
          } else {
            sendRequest();
          }
          continue;
        }
        if (step === 'auth') {
          if (buf.length < 2) return;
          marks.auth = performance.now();
          const status = buf[1] as number;
          buf = buf.subarray(2);
          if (status !== 0) return finish({ kind: 'refused', step, code: status, elapsedMs: elapsed() });
          sendRequest();
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
          const now = performance.now();
          const steps: SetupSteps = {
            connectMs: marks.connected - started,
            greetingMs: marks.method - marks.connected,
            credentialsMs: marks.auth > 0 ? marks.auth - marks.method : 0,
            connectRequestMs: now - (marks.auth || marks.method),
          };
          finish({ kind: 'open', socket, elapsedMs: now - started, steps });
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
      marks.connected = performance.now();
      step = 'method';
      socket.write(Buffer.from(o.username === null || o.username === undefined ? [5, 1, 0] : [5, 1, 2]));
    });
  });
}

/** A tunnel that did not open, as an error (the benchmarks stop on one). */
export class SocksTunnelError extends Error {
  constructor(readonly outcome: Exclude<TunnelOutcome, { kind: 'open' }>) {
    super(outcome.kind === 'refused' ? `SOCKS5 ${outcome.step} refused with ${outcome.code}` : `SOCKS5 ${outcome.kind} at the ${outcome.step} step`);
    this.name = 'SocksTunnelError';
  }
}

/** openSocksTunnel for callers that want the socket or an exception (the benchmarks). */
export async function openSocksTunnelOrThrow(o: SocksTunnelOptions): Promise<{ socket: net.Socket; setupMs: number; steps: SetupSteps }> {
  const outcome = await openSocksTunnel(o);
  if (outcome.kind !== 'open') throw new SocksTunnelError(outcome);
  // Paused until the caller pipes or reads it, so no byte is lost in between.
  outcome.socket.pause();
  return { socket: outcome.socket, setupMs: outcome.elapsedMs, steps: outcome.steps };
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
    socket.resume();
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
    socket.resume();
    socket.write(`GET ${path} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
  });
}

/** A tunnel and one GET through it: the body when it opened, else the outcome that ended it. */
export async function socksHttpGet(o: SocksTunnelOptions & { path?: string; hostHeader?: string }): Promise<{ outcome: TunnelOutcome; body: string | null }> {
  const outcome = await openSocksTunnel(o);
  if (outcome.kind !== 'open') return { outcome, body: null };
  const { body } = await httpGetOverTunnel(outcome.socket, o.hostHeader ?? `${o.host}:${o.targetPort}`, o.path ?? '/', o.timeoutMs ?? DEFAULT_HANDSHAKE_TIMEOUT_MS);
  return { outcome, body };
}
