/**
 * The server side of a SOCKS5 handshake as a pure state machine: bytes in, steps out. The
 * listener is a thin I/O shell around it, so every protocol decision (method selection,
 * credential refusal, reply codes for bad requests) is testable without sockets, and chunked
 * delivery provably behaves like whole delivery.
 */
import type { CredentialCheck } from './proxy-types.js';
import {
  AuthMethod,
  METHOD_NO_AUTHENTICATION,
  METHOD_NONE_ACCEPTABLE,
  METHOD_USERNAME_PASSWORD,
  ReplyCode,
  USER_PASSWORD_ACCEPTED,
  USER_PASSWORD_REFUSED,
  encodeReply,
  parseGreeting,
  parseRequest,
  parseUserPasswordRequest,
  type ParseOutcome,
  type Socks5ProtocolError,
  type Socks5Target,
} from './socks5-protocol.js';

/**
 * required: a valid username/password is mandatory (the normal case);
 * optional: AUTH_DISABLED, no credential needed, a username that is sent is still the session key;
 * ignored: a session port, credential-free and pinned, so a username is read and discarded.
 */
export type HandshakeAuthMode = 'required' | 'optional' | 'ignored';

export type HandshakeRefusal =
  | { kind: 'no-acceptable-method'; offeredMethods: number[] }
  | { kind: 'credential-refused'; usernamePresent: boolean }
  | { kind: 'command-not-supported'; command: 'bind' | 'udp-associate' }
  | { kind: 'protocol-error'; error: Socks5ProtocolError };

export type HandshakeStep =
  /** Write these bytes to the client. */
  | { type: 'send'; bytes: Buffer }
  /**
   * The client may now send its request, and the session key is settled: the listener can route
   * while the request is on its way. Not terminal; a 'connect' or 'close' follows.
   */
  | { type: 'authenticated'; sessionKey: string | null }
  /** Terminal: a CONNECT to dial. `rest` holds bytes the client sent after the request. */
  | { type: 'connect'; target: Socks5Target; sessionKey: string | null; rest: Buffer }
  /** Terminal: close the connection (after writing any preceding `send`). */
  | { type: 'close'; refusal: HandshakeRefusal };

type Phase = 'greeting' | 'credentials' | 'request' | 'done';

const EMPTY = Buffer.alloc(0);

export class Socks5ServerHandshake {
  private phase: Phase = 'greeting';
  private pending: Buffer = EMPTY;
  private sessionKey: string | null = null;
  /** The credential that passed the check (on the hop listener, the one the hop credential carries); null when none was required. */
  private credentialId: string | null = null;

  constructor(
    private readonly mode: HandshakeAuthMode,
    private readonly check: CredentialCheck,
  ) {}

  get finished(): boolean {
    return this.phase === 'done';
  }

  /** Feeds client bytes; once a terminal step has been returned, further input is ignored. */
  /** The credential that opened the connection, once authenticated; null when none was required. */
  get credential(): string | null {
    return this.credentialId;
  }

  feed(chunk: Buffer): HandshakeStep[] {
    if (this.phase === 'done') return [];
    let buf = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    const steps: HandshakeStep[] = [];
    for (;;) {
      const phase = this.phase as Phase;
      if (phase === 'done') {
        this.pending = EMPTY;
        return steps;
      }
      const consumed =
        phase === 'greeting' ? this.onGreeting(buf, steps) : phase === 'credentials' ? this.onCredentials(buf, steps) : this.onRequest(buf, steps);
      if (consumed === 0) {
        this.pending = buf;
        return steps;
      }
      buf = buf.subarray(consumed);
    }
  }

  /** Each handler returns the bytes it consumed; 0 means it needs more. Terminal handlers consume everything. */
  private onGreeting(buf: Buffer, steps: HandshakeStep[]): number {
    const parsed = parseGreeting(buf);
    if (parsed.status === 'need-more') return 0;
    if (parsed.status === 'error') return this.protocolError(parsed, buf, steps);
    const methods = parsed.value.methods;
    const offersPassword = methods.includes(AuthMethod.UsernamePassword);
    const offersNone = methods.includes(AuthMethod.NoAuthentication);
    if (offersPassword) {
      // Preferred even when not required: the username is the session key.
      steps.push({ type: 'send', bytes: METHOD_USERNAME_PASSWORD });
      this.phase = 'credentials';
    } else if (offersNone && this.mode !== 'required') {
      steps.push({ type: 'send', bytes: METHOD_NO_AUTHENTICATION });
      steps.push({ type: 'authenticated', sessionKey: null });
      this.phase = 'request';
    } else {
      steps.push({ type: 'send', bytes: METHOD_NONE_ACCEPTABLE });
      steps.push({ type: 'close', refusal: { kind: 'no-acceptable-method', offeredMethods: methods } });
      this.phase = 'done';
      return buf.length;
    }
    return parsed.consumed;
  }

  private onCredentials(buf: Buffer, steps: HandshakeStep[]): number {
    const parsed = parseUserPasswordRequest(buf);
    if (parsed.status === 'need-more') return 0;
    if (parsed.status === 'error') {
      steps.push({ type: 'send', bytes: USER_PASSWORD_REFUSED });
      return this.protocolError(parsed, buf, steps);
    }
    const username = parsed.value.username === '' ? null : parsed.value.username;
    const password = parsed.value.password === '' ? null : parsed.value.password;
    if (this.mode === 'required') {
      const verdict = this.check(username, password);
      if (!verdict.ok) {
        steps.push({ type: 'send', bytes: USER_PASSWORD_REFUSED });
        steps.push({ type: 'close', refusal: { kind: 'credential-refused', usernamePresent: username !== null } });
        this.phase = 'done';
        return buf.length;
      }
      this.credentialId = verdict.credential;
    }
    this.sessionKey = this.mode === 'ignored' ? null : username;
    steps.push({ type: 'send', bytes: USER_PASSWORD_ACCEPTED });
    steps.push({ type: 'authenticated', sessionKey: this.sessionKey });
    this.phase = 'request';
    return parsed.consumed;
  }

  private onRequest(buf: Buffer, steps: HandshakeStep[]): number {
    const parsed = parseRequest(buf);
    if (parsed.status === 'need-more') return 0;
    if (parsed.status === 'error') return this.protocolError(parsed, buf, steps);
    this.phase = 'done';
    const { command, target } = parsed.value;
    if (command !== 'connect') {
      steps.push({ type: 'send', bytes: encodeReply(ReplyCode.CommandNotSupported) });
      steps.push({ type: 'close', refusal: { kind: 'command-not-supported', command } });
      return buf.length;
    }
    steps.push({ type: 'connect', target, sessionKey: this.sessionKey, rest: buf.subarray(parsed.consumed) });
    return buf.length;
  }

  private protocolError(parsed: ParseOutcome<unknown> & { status: 'error' }, buf: Buffer, steps: HandshakeStep[]): number {
    const { error } = parsed;
    if (error.replyCode !== null) steps.push({ type: 'send', bytes: encodeReply(error.replyCode) });
    steps.push({ type: 'close', refusal: { kind: 'protocol-error', error } });
    this.phase = 'done';
    return buf.length;
  }
}
