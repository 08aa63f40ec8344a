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
  parseMethodSelection,
  parseReply,
  type Socks5Target,
} from './socks5-protocol.js';

export type SocksDialPhase = 'connecting' | 'negotiating' | 'awaiting-reply';

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

export interface SocksDialOptions {
  socksHost: string;
  socksPort: number;
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
  /** Milliseconds from the start of the dial to tor's success reply. */
  connectMs: number;
}

const GREETING_NO_AUTH = encodeGreeting([AuthMethod.NoAuthentication]);

export function dialSocks5(options: SocksDialOptions): Promise<DialedUpstream> {
  return new Promise<DialedUpstream>((resolve, reject) => {
    const started = performance.now();
    let phase: SocksDialPhase = 'connecting';
    let pending: Buffer | null = null;
    let settled = false;

    if (options.signal?.aborted) {
      reject(new SocksDialError('aborted', phase, null, 'dial aborted', 0));
      return;
    }

    const socket = net.connect({ host: options.socksHost, port: options.socksPort, allowHalfOpen: true, noDelay: true });
    const timer = setTimeout(() => {
      fail('timeout', null, `no SOCKS5 answer within ${options.timeoutMs} ms`);
    }, options.timeoutMs);

    const cleanup = (): void => {
      clearTimeout(timer);
      socket.removeListener('connect', onConnect);
      socket.removeListener('data', onData);
      socket.removeListener('error', onError);
      socket.removeListener('close', onClose);
      socket.removeListener('end', onClose);
      options.signal?.removeEventListener('abort', onAbort);
    };

    function fail(kind: SocksDialErrorKind, replyCode: number | null, message: string, socketErrorCode?: string): void {
      if (settled) return;
      settled = true;
      cleanup();
      socket.destroy();
      reject(new SocksDialError(kind, phase, replyCode, message, performance.now() - started, socketErrorCode));
    }

    function onConnect(): void {
      phase = 'negotiating';
      // Greeting and CONNECT in one write: offering only "no authentication" leaves nothing to
      // negotiate, and tor parses pipelined SOCKS5 messages in order (fetch_from_buf_socks loops
      // over its buffer), so every connection saves one round trip to tor (bench: setup).
      socket.write(Buffer.concat([GREETING_NO_AUTH, encodeRequest('connect', options.target)]));
    }

    function onData(chunk: Buffer): void {
      let buf = pending === null ? chunk : Buffer.concat([pending, chunk]);
      pending = null;
      if (phase === 'negotiating') {
        const selection = parseMethodSelection(buf);
        if (selection.status === 'need-more') {
          pending = buf;
          return;
        }
        if (selection.status === 'error') return fail('protocol', null, selection.error.message);
        if (selection.value !== AuthMethod.NoAuthentication) {
          return fail('protocol', null, `SOCKS server selected method ${selection.value}, expected no authentication`);
        }
        phase = 'awaiting-reply';
        buf = buf.subarray(selection.consumed);
        if (buf.length === 0) return;
      }
      const reply = parseReply(buf);
      if (reply.status === 'need-more') {
        pending = buf;
        return;
      }
      if (reply.status === 'error') return fail('protocol', null, reply.error.message);
      if (reply.value.code !== ReplyCode.Succeeded) {
        return fail('refused', reply.value.code, `SOCKS server refused CONNECT with reply ${reply.value.code}`);
      }
      settled = true;
      cleanup();
      socket.pause();
      const rest = buf.subarray(reply.consumed);
      if (rest.length > 0) socket.unshift(rest);
      resolve({
        socket,
        readBase: socket.bytesRead - rest.length,
        writeBase: socket.bytesWritten,
        connectMs: performance.now() - started,
      });
    }

    function onError(error: NodeJS.ErrnoException): void {
      fail(phase === 'connecting' ? 'connect' : 'closed', null, error.message, error.code);
    }

    function onClose(): void {
      fail(phase === 'connecting' ? 'connect' : 'closed', null, 'SOCKS server closed the connection during the handshake');
    }

    function onAbort(): void {
      fail('aborted', null, 'dial aborted');
    }

    socket.on('connect', onConnect);
    socket.on('data', onData);
    socket.on('error', onError);
    socket.on('close', onClose);
    // allowHalfOpen: a FIN alone would not close the socket, and the handshake would wait for the deadline.
    socket.on('end', onClose);
    options.signal?.addEventListener('abort', onAbort, { once: true });
  });
}
