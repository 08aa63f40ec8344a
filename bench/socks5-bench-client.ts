/**
 * The benchmarks' SOCKS5 client. It behaves like curl: one round trip per step (greeting,
 * then username/password when given, then CONNECT), each sent only after the previous reply,
 * so a measured setup contains every round trip a real client pays. Written apart from
 * workers/proxy, so the proxy is measured by a second implementation.
 */
import net from 'node:net';

export interface SocksCredentials {
  username: string;
  password: string;
}

export interface OpenTunnelOptions {
  proxyPort: number;
  proxyHost?: string;
  /** A Unix-socket SOCKS5 listener (an instance's own); replaces proxyHost:proxyPort. */
  proxyPath?: string;
  credentials?: SocksCredentials;
  /** IPv4 literal or a domain name (sent as a domain, never resolved here). */
  targetHost: string;
  targetPort: number;
  timeoutMs?: number;
}

export interface OpenedTunnel {
  /**
   * Ready for payload, paused. Only a no-op 'error' listener of ours is left on it, so a reset
   * never crashes the benchmark: 'close' follows every error, and callers watch that.
   */
  socket: net.Socket;
  /** From just before the TCP connect to the CONNECT success reply, in ms. */
  setupMs: number;
  /** The same time split by step: TCP connect, greeting round trip, credentials round trip (0 without), CONNECT round trip. */
  steps: SetupSteps;
}

export interface SetupSteps {
  connectMs: number;
  greetingMs: number;
  credentialsMs: number;
  connectRequestMs: number;
}

export class SocksTunnelError extends Error {
  constructor(
    message: string,
    readonly replyCode: number | null = null,
  ) {
    super(message);
    this.name = 'SocksTunnelError';
  }
}

function connectRequest(host: string, port: number): Buffer {
  if (net.isIPv4(host)) {
    const b = Buffer.alloc(10);
    b.set([5, 1, 0, 1, ...host.split('.').map(Number)]);
    b.writeUInt16BE(port, 8);
    return b;
  }
  const name = Buffer.from(host, 'latin1');
  const b = Buffer.alloc(7 + name.length);
  b.set([5, 1, 0, 3, name.length]);
  name.copy(b, 5);
  b.writeUInt16BE(port, 5 + name.length);
  return b;
}

function credentialsMessage(c: SocksCredentials): Buffer {
  const u = Buffer.from(c.username, 'utf8');
  const p = Buffer.from(c.password, 'utf8');
  return Buffer.concat([Buffer.from([1, u.length]), u, Buffer.from([p.length]), p]);
}

/** Length of a complete CONNECT reply at the start of buf, or 0 when more bytes are needed. */
function replyLength(buf: Buffer): number {
  if (buf.length < 5) return 0;
  const type = buf[3];
  const length = type === 1 ? 10 : type === 4 ? 22 : type === 3 ? 7 + (buf[4] as number) : 10;
  return buf.length >= length ? length : 0;
}

export function openSocksTunnel(o: OpenTunnelOptions): Promise<OpenedTunnel> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const socket = o.proxyPath !== undefined ? net.connect({ path: o.proxyPath }) : net.connect({ host: o.proxyHost ?? '127.0.0.1', port: o.proxyPort, noDelay: true });
    let stage: 'method' | 'auth' | 'reply' = 'method';
    const marks = { connected: 0, method: 0, auth: 0 };
    let pending: Buffer = Buffer.alloc(0);
    const timer = setTimeout(() => fail(new SocksTunnelError(`no SOCKS5 answer within ${o.timeoutMs ?? 10_000} ms`)), o.timeoutMs ?? 10_000);

    const cleanup = (): void => {
      clearTimeout(timer);
      socket.removeListener('data', onData);
      socket.removeListener('error', fail);
      socket.removeListener('close', onClose);
    };
    function fail(e: Error): void {
      cleanup();
      socket.destroy();
      reject(e);
    }
    function onClose(): void {
      fail(new SocksTunnelError(`proxy closed the connection during the ${stage} step`));
    }
    function onData(chunk: Buffer): void {
      pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
      if (stage === 'method') {
        if (pending.length < 2) return;
        marks.method = performance.now();
        const method = pending[1];
        pending = pending.subarray(2);
        if (method === 2 && o.credentials) {
          stage = 'auth';
          socket.write(credentialsMessage(o.credentials));
          return;
        }
        if (method !== 0) return fail(new SocksTunnelError(`proxy selected method ${method}`));
        stage = 'reply';
        socket.write(connectRequest(o.targetHost, o.targetPort));
        return;
      }
      if (stage === 'auth') {
        if (pending.length < 2) return;
        if (pending[1] !== 0) return fail(new SocksTunnelError('credentials refused'));
        marks.auth = performance.now();
        pending = pending.subarray(2);
        stage = 'reply';
        socket.write(connectRequest(o.targetHost, o.targetPort));
        return;
      }
      const length = replyLength(pending);
      if (length === 0) return;
      if (pending[1] !== 0) return fail(new SocksTunnelError(`CONNECT refused with reply ${pending[1]}`, pending[1] as number));
      const done = performance.now();
      const setupMs = done - started;
      const requestSent = marks.auth || marks.method;
      const steps: SetupSteps = {
        connectMs: marks.connected - started,
        greetingMs: marks.method - marks.connected,
        credentialsMs: marks.auth ? marks.auth - marks.method : 0,
        connectRequestMs: done - requestSent,
      };
      const rest = pending.subarray(length);
      cleanup();
      socket.on('error', () => undefined);
      socket.pause();
      if (rest.length > 0) socket.unshift(rest);
      resolve({ socket, setupMs, steps });
    }

    socket.on('connect', () => {
      marks.connected = performance.now();
      socket.write(o.credentials ? Buffer.from([5, 1, 2]) : Buffer.from([5, 1, 0]));
    });
    socket.on('data', onData);
    socket.on('error', fail);
    socket.on('close', onClose);
  });
}
