/**
 * Dials a tor instance's SocksPort and asks it to CONNECT to a target. Only method 0 (no
 * authentication) is offered: pool credentials are never forwarded to tor, because
 * IsolateSOCKSAuth would otherwise split one instance's callers over several exits. Domains are
 * passed through as domains, so names are resolved at the exit.
 */
import net from 'node:net';
import {
  AuthMethod,
  ReplyCode,
  encodeGreeting,
  encodeRequest,
  encodeUserPasswordRequest,
  parseMethodSelection,
  parseReply,
  parseUserPasswordReply,
  type Socks5Target,
} from './socks5-protocol.js';

export type SocksDialPhase = 'connecting' | 'negotiating' | 'authenticating' | 'awaiting-reply';

/**
 * connect: the SocksPort could not be reached (or the socket failed);
 * protocol: the server did not speak SOCKS5 as expected (or demanded authentication);
 * refused: a well-formed non-zero reply, see replyCode;
 * timeout: the deadline passed; closed: the server hung up mid-handshake; aborted: the caller gave up.
 */
export type SocksDialErrorKind = 'connect' | 'protocol' | 'refused' | 'timeout' | 'closed' | 'aborted';

export class SocksDialError extends Error {
  constructor(
    readonly kind: SocksDialErrorKind,
    readonly phase: SocksDialPhase,
    /** tor's reply code when kind is 'refused', else null. */
    readonly replyCode: number | null,
    message: string,
    /** Milliseconds from the start of the dial to the failure. */
    readonly elapsedMs: number,
    readonly socketErrorCode?: string,
  ) {
    super(message);
    this.name = 'SocksDialError';
  }
}

export interface SocksDialOptions extends UpstreamAddress {
  target: Socks5Target;
  /** Deadline for the whole dial: TCP connect, method negotiation and tor's CONNECT reply. */
  timeoutMs: number;
  signal?: AbortSignal;
}

export interface DialedUpstream {
  /** Paused, no listeners of ours left, allowHalfOpen and noDelay set. Bytes sent after the reply are unshifted. */
  socket: net.Socket;
  /** socket.bytesRead at the first payload byte, so bytesRead - readBase counts payload only. */
  readBase: number;
  /** socket.bytesWritten after the handshake, so bytesWritten - writeBase counts payload only. */
  writeBase: number;
  /** Milliseconds from connect() (the CONNECT goes out then, or as soon as the socket is connected) to tor's success reply. */
  connectMs: number;
}

/** Who hears how a dial ended, without a promise (the SOCKS5 listener's dial of a known route). */
export interface DialListener {
  dialed(value: DialedUpstream): void;
  /** Called in a later microtask, never from inside the call that ended the dial (abort()). */
  dialFailed(error: SocksDialError): void;
}

const GREETING_NO_AUTH = encodeGreeting([AuthMethod.NoAuthentication]);
const GREETING_USER_PASSWORD = encodeGreeting([AuthMethod.UsernamePassword]);

export interface UpstreamAddress {
  host: string;
  port: number;
  /** The instance's Unix-socket SocksPort; when set it is dialled instead of host:port. */
  path?: string;
  /**
   * Username/password for the SOCKS server: only for the hop to another node of the fleet (the
   * session's owner, supervisor/fleet); a tor instance is always dialled without.
   */
  auth?: { username: string; password: string };
}

/**
 * A SOCKS5 connection to an instance that is opened before its target is known: the TCP (or
 * Unix-socket) connect runs while the client's own CONNECT is still on its way, so the
 * connection setup a client sees carries only the CONNECT round trip to tor (bench: setup).
 * Nothing is written until the target is known: the greeting (with the credentials, on the hop to
 * another node) and the CONNECT then go out in one write, since the server reads pipelined SOCKS5
 * messages in order (tor's fetch_from_buf_socks loops over its buffer, as exitpool's own
 * handshake does). One write per dial instead of two is a system call fewer in the worker and a
 * read fewer in tor on every proxied connection (docs/performance.md, "Next to the peers"), at
 * no cost in latency: tor answers the greeting at once, before the CONNECT's reply.
 * `connect()` may be called at any point of the opening. A failure before `connect()` is kept
 * and reported by it.
 */
export class Socks5Upstream {
  private readonly socket: net.Socket;
  private readonly openedAt = performance.now();
  private phase: SocksDialPhase = 'connecting';
  private pending: Buffer | null = null;
  private target: Socks5Target | null = null;
  private requestWritten = false;
  private readonly auth: { username: string; password: string } | undefined;
  private requestedAt = 0;
  private timer: NodeJS.Timeout | null = null;
  /** Set once the outcome is known; later events are ignored. */
  private outcome: { ok: true; value: DialedUpstream } | { ok: false; error: SocksDialError } | null = null;
  private waiter: DialListener | null = null;

  constructor(address: UpstreamAddress) {
    this.auth = address.auth;
    this.socket =
      address.path !== undefined
        ? net.connect({ path: address.path, allowHalfOpen: true })
        : net.connect({ host: address.host, port: address.port, allowHalfOpen: true, noDelay: true });
    this.socket.on('connect', this.onConnect);
    this.socket.on('data', this.onData);
    this.socket.on('error', this.onError);
    this.socket.on('close', this.onClose);
    // allowHalfOpen: a FIN alone would not close the socket, and the handshake would wait for the deadline.
    this.socket.on('end', this.onClose);
  }

  /**
   * Sends the CONNECT for `target` and resolves with the tunnel-ready socket once tor answers
   * success. The deadline runs from this call. Call at most once.
   */
  connect(target: Socks5Target, timeoutMs: number): Promise<DialedUpstream> {
    return new Promise<DialedUpstream>((resolve, reject) => this.connectWith(target, timeoutMs, { dialed: resolve, dialFailed: reject }));
  }

  /** connect() reporting to `listener` instead of a promise. Call at most once (either of the two). */
  connectWith(target: Socks5Target, timeoutMs: number, listener: DialListener): void {
    this.target = target;
    this.requestedAt = performance.now();
    if (this.outcome !== null) {
      // Only a failure can be known before the request: success needs tor's reply to it.
      if (!this.outcome.ok) {
        const error = this.outcome.error;
        queueMicrotask(() => listener.dialFailed(error));
      }
      return;
    }
    this.waiter = listener;
    this.timer = setTimeout(Socks5Upstream.onDeadline, timeoutMs, this, timeoutMs);
    if (this.phase !== 'connecting') this.writeRequest();
  }

  /** The dial's deadline (static, so that arming it makes no closure). */
  private static onDeadline(this: void, upstream: Socks5Upstream, timeoutMs: number): void {
    upstream.fail('timeout', null, `no SOCKS5 answer within ${timeoutMs} ms`);
  }

  /** Gives up: the socket is destroyed and a pending connect() rejects with kind 'aborted'. Idempotent. */
  abort(): void {
    this.fail('aborted', null, 'dial aborted');
  }

  /** Greeting (and credentials) and CONNECT in one write, once connected and the target is known. */
  private writeRequest(): void {
    if (this.requestWritten || this.target === null) return;
    this.requestWritten = true;
    const greeting = this.auth ? Buffer.concat([GREETING_USER_PASSWORD, encodeUserPasswordRequest(this.auth.username, this.auth.password)]) : GREETING_NO_AUTH;
    this.socket.write(Buffer.concat([greeting, encodeRequest('connect', this.target)]));
  }

  private readonly onConnect = (): void => {
    this.phase = 'negotiating';
    this.writeRequest();
  };

  private readonly onData = (chunk: Buffer): void => {
    if (this.outcome !== null) return;
    if (!this.requestWritten) return this.fail('protocol', null, 'SOCKS server sent data before the greeting');
    let buf = this.pending === null ? chunk : Buffer.concat([this.pending, chunk]);
    this.pending = null;
    if (this.phase === 'negotiating') {
      const selection = parseMethodSelection(buf);
      if (selection.status === 'need-more') {
        this.pending = buf;
        return;
      }
      if (selection.status === 'error') return this.fail('protocol', null, selection.error.message);
      const expected = this.auth ? AuthMethod.UsernamePassword : AuthMethod.NoAuthentication;
      if (selection.value !== expected) {
        return this.fail('protocol', null, `SOCKS server selected method ${selection.value}, expected ${this.auth ? 'username/password' : 'no authentication'}`);
      }
      this.phase = this.auth ? 'authenticating' : 'awaiting-reply';
      buf = buf.subarray(selection.consumed);
      if (buf.length === 0) return;
    }
    if (this.phase === 'authenticating') {
      const accepted = parseUserPasswordReply(buf);
      if (accepted.status === 'need-more') {
        this.pending = buf;
        return;
      }
      if (accepted.status === 'error') return this.fail('protocol', null, accepted.error.message);
      if (!accepted.value) return this.fail('protocol', null, 'SOCKS server refused the credentials');
      this.phase = 'awaiting-reply';
      buf = buf.subarray(accepted.consumed);
      if (buf.length === 0) return;
    }
    const reply = parseReply(buf);
    if (reply.status === 'need-more') {
      this.pending = buf;
      return;
    }
    if (reply.status === 'error') return this.fail('protocol', null, reply.error.message);
    if (reply.value.code !== ReplyCode.Succeeded) {
      return this.fail('refused', reply.value.code, `SOCKS server refused CONNECT with reply ${reply.value.code}`);
    }
    const { socket } = this;
    this.detach();
    socket.pause();
    const rest = buf.subarray(reply.consumed);
    if (rest.length > 0) socket.unshift(rest);
    const value: DialedUpstream = {
      socket,
      readBase: socket.bytesRead - rest.length,
      writeBase: socket.bytesWritten,
      connectMs: performance.now() - this.requestedAt,
    };
    this.outcome = { ok: true, value };
    const waiter = this.waiter;
    this.waiter = null;
    waiter?.dialed(value);
  };

  private readonly onError = (error: NodeJS.ErrnoException): void => {
    this.fail(this.phase === 'connecting' ? 'connect' : 'closed', null, error.message, error.code);
  };

  private readonly onClose = (): void => {
    this.fail(this.phase === 'connecting' ? 'connect' : 'closed', null, 'SOCKS server closed the connection during the handshake');
  };

  private fail(kind: SocksDialErrorKind, replyCode: number | null, message: string, socketErrorCode?: string): void {
    if (this.outcome !== null) return;
    this.detach();
    this.socket.destroy();
    // Elapsed from the request when there is one (what the client waited), else from the opening.
    const since = this.target !== null ? this.requestedAt : this.openedAt;
    const error = new SocksDialError(kind, this.phase, replyCode, message, performance.now() - since, socketErrorCode);
    this.outcome = { ok: false, error };
    const waiter = this.waiter;
    this.waiter = null;
    if (waiter !== null) queueMicrotask(() => waiter.dialFailed(error));
  }

  /** Leaves the socket with no listeners of ours (the tunnel attaches its own) and no deadline. */
  private detach(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.socket.removeListener('connect', this.onConnect);
    this.socket.removeListener('data', this.onData);
    this.socket.removeListener('error', this.onError);
    this.socket.removeListener('close', this.onClose);
    this.socket.removeListener('end', this.onClose);
  }
}

/** Opens and connects in one go, for a caller that knows the target up front (the HTTP proxy). */
export function dialSocks5(options: SocksDialOptions): Promise<DialedUpstream> {
  if (options.signal?.aborted) return Promise.reject(new SocksDialError('aborted', 'connecting', null, 'dial aborted', 0));
  const upstream = new Socks5Upstream(options);
  const signal = options.signal;
  const onAbort = (): void => upstream.abort();
  signal?.addEventListener('abort', onAbort, { once: true });
  const dialed = upstream.connect(options.target, options.timeoutMs);
  if (signal) void dialed.then(() => signal.removeEventListener('abort', onAbort), () => signal.removeEventListener('abort', onAbort));
  return dialed;
}
