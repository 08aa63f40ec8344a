/**
 * A deliberately independent SOCKS5 client (RFC 1928 / RFC 1929) on a raw `net` socket, written
 * from the RFCs rather than from the service's own codec, so end-to-end tests see exactly which
 * handshake step the listener refused and with which code.
 */
import net from 'node:net';

export interface SocksCredential {
  username: string;
  password: string;
}

export interface SocksTarget {
  host: string;
  port: number;
}

/** Where the exchange ended; `elapsedMs` runs from the TCP connect to that point. */
export type SocksOutcome =
  | { kind: 'connected'; socket: net.Socket; elapsedMs: number }
  /** The server chose "no acceptable methods" (0xFF) for the methods offered. */
  | { kind: 'no-acceptable-method'; elapsedMs: number }
  /** RFC 1929 sub-negotiation answered with a non-zero status. */
  | { kind: 'auth-refused'; status: number; elapsedMs: number }
  /** The CONNECT reply carried this non-zero reply code. */
  | { kind: 'reply'; code: number; elapsedMs: number }
  /** The server closed the connection before the named step was answered. */
  | { kind: 'closed'; step: 'greeting' | 'auth' | 'connect'; elapsedMs: number };

export interface SocksConnectOptions {
  port: number;
  target: SocksTarget;
  /** null offers only "no authentication"; a credential offers only username/password. */
  credential: SocksCredential | null;
  /** Source address of the TCP connection (any 127.0.0.x works on loopback). */
  localAddress?: string;
  timeoutMs?: number;
}

export class SocksClientTimeoutError extends Error {
  constructor(readonly step: string, readonly timeoutMs: number) {
    super(`SOCKS5 ${step} not answered within ${timeoutMs} ms`);
    this.name = 'SocksClientTimeoutError';
  }
}

/** Buffers a socket's bytes so the handshake can read exact lengths. */
class ByteReader {
  private buffered = Buffer.alloc(0);
  private ended = false;
  private wake: (() => void) | null = null;

  constructor(private readonly socket: net.Socket) {
    socket.on('data', this.onData);
    socket.on('end', this.onEnd);
    socket.on('close', this.onEnd);
    socket.on('error', this.onEnd);
  }

  private readonly onData = (chunk: Buffer): void => {
    this.buffered = Buffer.concat([this.buffered, chunk]);
    this.wake?.();
  };

  private readonly onEnd = (): void => {
    this.ended = true;
    this.wake?.();
  };

  /** Exactly n bytes, or null when the peer closed first. */
  async read(n: number): Promise<Buffer | null> {
    while (this.buffered.length < n) {
      if (this.ended) return null;
      await new Promise<void>((resolve) => (this.wake = resolve));
      this.wake = null;
    }
    const out = this.buffered.subarray(0, n);
    this.buffered = this.buffered.subarray(n);
    return out;
  }

  /** Stops reading; returns what was buffered beyond the handshake. */
  detach(): Buffer {
    this.socket.off('data', this.onData);
    this.socket.off('end', this.onEnd);
    this.socket.off('close', this.onEnd);
    this.socket.off('error', this.onEnd);
    return this.buffered;
  }
}

function encodeTarget(target: SocksTarget): Buffer {
  const port = Buffer.alloc(2);
  port.writeUInt16BE(target.port);
  if (net.isIPv4(target.host)) {
    return Buffer.concat([Buffer.from([0x01]), Buffer.from(target.host.split('.').map(Number)), port]);
  }
  const name = Buffer.from(target.host, 'utf8');
  return Buffer.concat([Buffer.from([0x03, name.length]), name, port]);
}

async function handshake(socket: net.Socket, reader: ByteReader, o: SocksConnectOptions, started: number): Promise<SocksOutcome> {
  const elapsed = (): number => performance.now() - started;
  socket.write(Buffer.from(o.credential === null ? [0x05, 0x01, 0x00] : [0x05, 0x01, 0x02]));
  const choice = await reader.read(2);
  if (choice === null) return { kind: 'closed', step: 'greeting', elapsedMs: elapsed() };
  if (choice[1] === 0xff) return { kind: 'no-acceptable-method', elapsedMs: elapsed() };
  if (choice[1] === 0x02) {
    const cred = o.credential ?? { username: '', password: '' };
    const user = Buffer.from(cred.username, 'utf8');
    const pass = Buffer.from(cred.password, 'utf8');
    socket.write(Buffer.concat([Buffer.from([0x01, user.length]), user, Buffer.from([pass.length]), pass]));
    const status = await reader.read(2);
    if (status === null) return { kind: 'closed', step: 'auth', elapsedMs: elapsed() };
    if (status[1] !== 0x00) return { kind: 'auth-refused', status: status[1] as number, elapsedMs: elapsed() };
  }
  socket.write(Buffer.concat([Buffer.from([0x05, 0x01, 0x00]), encodeTarget(o.target)]));
  const head = await reader.read(4);
  if (head === null) return { kind: 'closed', step: 'connect', elapsedMs: elapsed() };
  const code = head[1] as number;
  // Consume the bound address so the tunnel starts clean.
  const atyp = head[3];
  const addrLength = atyp === 0x01 ? 4 : atyp === 0x04 ? 16 : ((await reader.read(1))?.[0] ?? 0);
  await reader.read(addrLength + 2);
  if (code !== 0x00) return { kind: 'reply', code, elapsedMs: elapsed() };
  return { kind: 'connected', socket, elapsedMs: elapsed() };
}

/** Runs the handshake and a CONNECT; on 'connected' the caller owns (and must end) the socket. */
export async function socksConnect(o: SocksConnectOptions): Promise<SocksOutcome> {
  const timeoutMs = o.timeoutMs ?? 20_000;
  const socket = net.connect({ host: '127.0.0.1', port: o.port, ...(o.localAddress ? { localAddress: o.localAddress } : {}) });
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  const started = performance.now();
  const reader = new ByteReader(socket);
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new SocksClientTimeoutError('handshake', timeoutMs)), timeoutMs);
  });
  try {
    const outcome = await Promise.race([handshake(socket, reader, o, started), deadline]);
    reader.detach();
    if (outcome.kind !== 'connected') socket.destroy();
    return outcome;
  } catch (e) {
    socket.destroy();
    throw e;
  } finally {
    clearTimeout(timer);
  }
}

export interface SocksHttpResult {
  outcome: SocksOutcome;
  /** The response body, or null when the tunnel was not opened. */
  body: string | null;
}

/** One HTTP/1.1 GET (Connection: close) through a SOCKS5 tunnel; the socket is closed after. */
export async function socksHttpGet(o: SocksConnectOptions & { path?: string; hostHeader?: string }): Promise<SocksHttpResult> {
  const outcome = await socksConnect(o);
  if (outcome.kind !== 'connected') return { outcome, body: null };
  const { socket } = outcome;
  const host = o.hostHeader ?? `${o.target.host}:${o.target.port}`;
  const response = await new Promise<string>((resolve, reject) => {
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new SocksClientTimeoutError('HTTP response', o.timeoutMs ?? 20_000));
    }, o.timeoutMs ?? 20_000);
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    socket.once('end', () => {
      clearTimeout(timer);
      socket.destroy();
      resolve(Buffer.concat(chunks).toString('utf8'));
    });
    socket.write(`GET ${o.path ?? '/'} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
  });
  const split = response.indexOf('\r\n\r\n');
  return { outcome, body: split < 0 ? '' : response.slice(split + 4) };
}
