import { EventEmitter } from 'node:events';
import { readFile } from 'node:fs/promises';
import { connect, type Socket } from 'node:net';
import { childLogger, type Logger } from '../../shared/logger.js';
import { Backoff } from './backoff.js';
import { parseQuotedString, quoteString } from './control-arguments.js';
import { controlEventTally, type ControlEventTally } from './control-event-tally.js';
import { parseEvent, type TorEvent } from './control-events.js';
import {
  ControlReplyParser,
  getInfoValues,
  isAsyncEvent,
  isSuccess,
  replyMessage,
  type ControlReply,
} from './control-reply.js';
import {
  ControlArgumentError,
  ControlAuthenticationError,
  ControlCommandError,
  ControlCommandTimeoutError,
  ControlConnectionLostError,
  ControlProtocolError,
} from './errors.js';
import type { ControlEndpoint } from './torrc.js';
import { errorMessage } from '../../shared/errors/error-message.js';

/**
 * One long-lived control connection to one tor. Commands are answered strictly in order
 * (control-spec §1), so they are written as they come and matched FIFO against non-650 replies;
 * 650 replies are events. A command without an answer by its deadline means the connection is
 * out of step: the command fails with ControlCommandTimeoutError and the connection is reset.
 * Lost connections are re-established with backoff for as long as `shouldReconnect()` says the
 * tor is alive; each new connection authenticates again and re-subscribes to the events.
 */

export interface ControlClientOptions {
  endpoint: ControlEndpoint;
  /** CookieAuthFile; read at every (re)connect because tor rewrites it when it restarts. */
  cookieFile: string;
  /** Subscribed with SETEVENTS after every successful authentication. */
  events?: readonly string[];
  commandTimeoutMs?: number;
  connectTimeoutMs?: number;
  reconnectInitialDelayMs?: number;
  reconnectMaxDelayMs?: number;
  /** Asked before each reconnect attempt; false stops reconnecting (e.g. the tor process exited). */
  shouldReconnect?: () => boolean;
  log?: Logger;
  /** Where received events are counted (default: the process's controlEventTally). */
  tally?: ControlEventTally;
}

export interface ControlClientEvents {
  /** An asynchronous 650 event, parsed. */
  event: [TorEvent];
  /** Authenticated and subscribed; `reconnect` is true after a loss. */
  connected: [{ reconnect: boolean }];
  /** The connection was lost; `willReconnect` says whether the client keeps trying. */
  disconnected: [{ reason: string; willReconnect: boolean }];
  /** Malformed input from tor (the connection is reset after a protocol error in a reply). */
  'protocol-error': [ControlProtocolError | Error];
}

export const DEFAULT_COMMAND_TIMEOUT_MS = 10_000;

interface PendingCommand {
  line: string;
  /** The verb only (e.g. GETINFO), for errors and logs: arguments may be long or sensitive. */
  verb: string;
  timeoutMs: number;
  resolve: (reply: ControlReply) => void;
  reject: (error: Error) => void;
  timer: NodeJS.Timeout;
  settled: boolean;
  written: boolean;
}

type ConnectionState = 'idle' | 'connecting' | 'ready' | 'closed';

export class TorControlClient extends EventEmitter<ControlClientEvents> {
  private readonly log: Logger;
  private readonly tally: ControlEventTally;
  private readonly commandTimeoutMs: number;
  private readonly connectTimeoutMs: number;
  private readonly backoff: Backoff;
  private socket: Socket | undefined;
  private parser = new ControlReplyParser();
  private state: ConnectionState = 'idle';
  /** Written, waiting for their reply, in write order. */
  private inflight: PendingCommand[] = [];
  /** Issued while no authenticated connection exists; written once one does. */
  private queued: PendingCommand[] = [];
  private reconnectTimer: NodeJS.Timeout | undefined;
  private everConnected = false;
  private readonly closedWaiters: Array<() => void> = [];

  constructor(private readonly options: ControlClientOptions) {
    super();
    this.log = options.log ?? childLogger({ component: 'tor-control' });
    this.tally = options.tally ?? controlEventTally;
    this.commandTimeoutMs = options.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS;
    this.connectTimeoutMs = options.connectTimeoutMs ?? this.commandTimeoutMs;
    this.backoff = new Backoff(options.reconnectInitialDelayMs ?? 100, options.reconnectMaxDelayMs ?? 5_000);
  }

  get connected(): boolean {
    return this.state === 'ready';
  }

  get closed(): boolean {
    return this.state === 'closed';
  }

  /**
   * Opens the first connection: connect, authenticate, subscribe. Rejects (and leaves the client
   * idle, ready for another connect()) if any step fails; automatic reconnects only begin after
   * a first success.
   */
  async connect(): Promise<void> {
    if (this.state === 'closed') throw new ControlConnectionLostError('connect', 'client closed');
    if (this.state !== 'idle') throw new Error('connect() called twice');
    await this.openConnection();
  }

  /** Sends one command and resolves with tor's reply, whatever its status. */
  request(line: string, timeoutMs = this.commandTimeoutMs): Promise<ControlReply> {
    const verb = line.split(' ', 1)[0] ?? '';
    if (/[\r\n]/.test(line)) {
      return Promise.reject(new ControlArgumentError('command contains a line break', verb));
    }
    if (this.state === 'closed') return Promise.reject(new ControlConnectionLostError(verb, 'client closed'));
    if (this.state === 'idle' && this.everConnected) {
      return Promise.reject(new ControlConnectionLostError(verb, 'connection lost and not reconnecting'));
    }
    return new Promise<ControlReply>((resolve, reject) => {
      const pending: PendingCommand = {
        line,
        verb,
        timeoutMs,
        resolve,
        reject,
        settled: false,
        written: false,
        timer: setTimeout(() => this.onDeadline(pending), timeoutMs),
      };
      if (this.state === 'ready' && this.queued.length === 0) this.write(pending);
      else this.queued.push(pending);
    });
  }

  /** Like request(), but a non-2xx reply rejects with ControlCommandError. */
  async command(line: string, timeoutMs?: number): Promise<ControlReply> {
    const reply = await this.request(line, timeoutMs);
    if (!isSuccess(reply)) throw new ControlCommandError(line.split(' ', 1)[0] ?? '', reply.status, replyMessage(reply));
    return reply;
  }

  async getInfo(keys: readonly string[], timeoutMs?: number): Promise<Map<string, string>> {
    assertArguments(keys);
    return getInfoValues(await this.command(`GETINFO ${keys.join(' ')}`, timeoutMs));
  }

  async signal(name: string): Promise<void> {
    assertArguments([name]);
    await this.command(`SIGNAL ${name}`);
  }

  /** SETCONF with every value quoted; an empty string resets the option to its default. */
  async setConf(values: ReadonlyArray<readonly [string, string]>): Promise<void> {
    assertArguments(values.map(([k]) => k));
    const args = values.map(([k, v]) => (v === '' ? k : `${k}=${quoteString(v)}`)).join(' ');
    await this.command(`SETCONF ${args}`);
  }

  /**
   * GETCONF: each requested option's current value; undefined when tor reports it unset
   * (default). Options that hold several lines keep the last one.
   */
  async getConf(keys: readonly string[]): Promise<Map<string, string | undefined>> {
    assertArguments(keys);
    const reply = await this.command(`GETCONF ${keys.join(' ')}`);
    const values = new Map<string, string | undefined>();
    for (const line of reply.lines) {
      const eq = line.text.indexOf('=');
      if (eq < 0) values.set(line.text, undefined);
      else {
        const raw = line.text.slice(eq + 1);
        values.set(line.text.slice(0, eq), raw.startsWith('"') ? parseQuotedString(raw, 0).value : raw);
      }
    }
    return values;
  }

  /** EXTENDCIRCUIT 0: a new general circuit on a path tor chooses (its ExitNodes apply); resolves with its id. */
  async launchCircuit(): Promise<string> {
    const reply = await this.command('EXTENDCIRCUIT 0');
    const id = /^EXTENDED (\d+)$/.exec(reply.lines[0]?.text ?? '')?.[1];
    if (id === undefined) throw new ControlProtocolError('EXTENDCIRCUIT answered without a circuit id', reply.lines[0]?.text ?? '');
    return id;
  }

  async closeCircuit(id: string): Promise<void> {
    if (!/^\d+$/.test(id)) throw new ControlArgumentError('circuit id must be numeric', id);
    await this.command(`CLOSECIRCUIT ${id}`);
  }

  /** Stops reconnecting, fails everything pending and closes the socket. Idempotent. */
  async close(): Promise<void> {
    if (this.state === 'closed' && !this.socket) return;
    this.state = 'closed';
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = undefined;
    this.failAll(this.queued, 'client closed');
    this.queued = [];
    const socket = this.socket;
    if (!socket) return;
    await new Promise<void>((resolve) => {
      this.closedWaiters.push(resolve);
      socket.destroy();
    });
  }

  private async openConnection(): Promise<void> {
    this.state = 'connecting';
    const reconnect = this.everConnected;
    let socket: Socket;
    try {
      socket = await this.dial();
    } catch (error) {
      if (this.state === 'connecting') this.state = 'idle';
      throw error;
    }
    if (this.closed) {
      socket.destroy();
      throw new ControlConnectionLostError('connect', 'client closed');
    }
    this.attach(socket);
    try {
      const cookie = await readCookie(this.options.cookieFile);
      const auth = await this.handshakeCommand(`AUTHENTICATE ${cookie}`);
      if (!isSuccess(auth)) throw new ControlAuthenticationError(`tor refused the cookie: ${auth.status} ${replyMessage(auth)}`);
      const events = this.options.events ?? [];
      if (events.length > 0) {
        assertArguments(events);
        const sub = await this.handshakeCommand(`SETEVENTS ${events.join(' ')}`);
        if (!isSuccess(sub)) throw new ControlCommandError('SETEVENTS', sub.status, replyMessage(sub));
      }
    } catch (error) {
      // The 'close' handler must not schedule a reconnect for a failed first connect().
      if (this.state === 'connecting' && !reconnect) this.state = 'idle';
      socket.destroy();
      throw error;
    }
    if (this.socket !== socket || this.closed) {
      throw new ControlConnectionLostError('connect', 'connection lost during handshake');
    }
    this.state = 'ready';
    this.everConnected = true;
    this.backoff.reset();
    this.log.debug('control connection ready', { reconnect });
    const waiting = this.queued;
    this.queued = [];
    for (const pending of waiting) if (!pending.settled) this.write(pending);
    this.emit('connected', { reconnect });
  }

  private dial(): Promise<Socket> {
    const endpoint = this.options.endpoint;
    return new Promise<Socket>((resolve, reject) => {
      const socket =
        endpoint.kind === 'unix' ? connect({ path: endpoint.path }) : connect({ host: '127.0.0.1', port: endpoint.port });
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new ControlConnectionLostError('connect', `no connection within ${this.connectTimeoutMs} ms`));
      }, this.connectTimeoutMs);
      socket.once('connect', () => {
        clearTimeout(timer);
        socket.removeAllListeners('error');
        resolve(socket);
      });
      socket.once('error', (error) => {
        clearTimeout(timer);
        socket.destroy();
        reject(new ControlConnectionLostError('connect', error.message));
      });
    });
  }

  private attach(socket: Socket): void {
    this.socket = socket;
    this.parser = new ControlReplyParser();
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => this.onData(socket, chunk));
    socket.on('error', (error) => this.log.debug('control socket error', { error: error.message }));
    socket.on('close', () => this.onClose(socket));
  }

  /** Handshake commands jump the queue: user commands wait until authentication is done. */
  private handshakeCommand(line: string): Promise<ControlReply> {
    return new Promise<ControlReply>((resolve, reject) => {
      const pending: PendingCommand = {
        line,
        verb: line.split(' ', 1)[0] ?? '',
        timeoutMs: this.commandTimeoutMs,
        resolve,
        reject,
        settled: false,
        written: false,
        timer: setTimeout(() => this.onDeadline(pending), this.commandTimeoutMs),
      };
      this.write(pending);
    });
  }

  private write(pending: PendingCommand): void {
    const socket = this.socket;
    if (!socket || socket.destroyed) {
      this.queued.push(pending);
      return;
    }
    pending.written = true;
    this.inflight.push(pending);
    socket.write(`${pending.line}\r\n`);
  }

  private onData(socket: Socket, chunk: Buffer): void {
    if (socket !== this.socket) return;
    for (const item of this.parser.push(chunk)) {
      if (item.kind === 'error') {
        this.log.warn('control protocol error; resetting connection', { error: item.error.message });
        this.emit('protocol-error', item.error);
        socket.destroy();
        return;
      }
      const reply = item.reply;
      if (isAsyncEvent(reply)) {
        this.dispatchEvent(reply);
        continue;
      }
      const pending = this.inflight.shift();
      if (!pending) {
        const error = new ControlProtocolError('reply without a command', replyMessage(reply));
        this.log.warn('control reply without a command; resetting connection', { status: reply.status });
        this.emit('protocol-error', error);
        socket.destroy();
        return;
      }
      this.settle(pending, () => pending.resolve(reply));
    }
  }

  private dispatchEvent(reply: ControlReply): void {
    let event: TorEvent;
    try {
      event = parseEvent(reply);
    } catch (error) {
      // One malformed event does not desynchronise the command stream: report and carry on.
      this.log.warn('unparseable control event', { error: errorMessage(error) });
      this.emit('protocol-error', error instanceof Error ? error : new Error(errorMessage(error)));
      return;
    }
    this.tally.note(event.type === 'OTHER' ? event.name : event.type);
    this.emit('event', event);
  }

  private onDeadline(pending: PendingCommand): void {
    if (pending.settled) return;
    this.settle(pending, () => pending.reject(new ControlCommandTimeoutError(pending.verb, pending.timeoutMs)));
    const queuedIndex = this.queued.indexOf(pending);
    if (queuedIndex >= 0) {
      this.queued.splice(queuedIndex, 1);
      return;
    }
    if (pending.written && this.socket && !this.socket.destroyed) {
      this.log.warn('control command timed out; resetting connection', { command: pending.verb, timeoutMs: pending.timeoutMs });
      this.socket.destroy();
    }
  }

  private settle(pending: PendingCommand, action: () => void): void {
    if (pending.settled) return;
    pending.settled = true;
    clearTimeout(pending.timer);
    action();
  }

  private failAll(list: PendingCommand[], reason: string): void {
    for (const pending of list) {
      this.settle(pending, () => pending.reject(new ControlConnectionLostError(pending.verb, reason)));
    }
  }

  private onClose(socket: Socket): void {
    if (socket !== this.socket) return;
    this.socket = undefined;
    const lost = this.inflight;
    this.inflight = [];
    this.failAll(lost, 'connection closed');
    for (const waiter of this.closedWaiters.splice(0)) waiter();
    if (this.state === 'closed') return;
    const wasReady = this.state === 'ready';
    // A failed first connect() is reported by its promise, not by a reconnect loop.
    if (!this.everConnected) {
      this.state = 'idle';
      return;
    }
    const willReconnect = this.options.shouldReconnect?.() ?? true;
    this.state = 'connecting';
    if (wasReady) this.emit('disconnected', { reason: 'connection closed', willReconnect });
    if (!willReconnect) {
      this.state = 'idle';
      this.failAll(this.queued, 'tor is gone');
      this.queued = [];
      return;
    }
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    if (this.state === 'closed' || this.reconnectTimer) return;
    const delay = this.backoff.next();
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      if (this.state === 'closed') return;
      if (!(this.options.shouldReconnect?.() ?? true)) {
        this.state = 'idle';
        this.failAll(this.queued, 'tor is gone');
        this.queued = [];
        return;
      }
      this.openConnection().catch((error: Error) => {
        this.log.debug('control reconnect failed', { error: error.message, attempt: this.backoff.attemptCount });
        if (this.state !== 'closed' && !this.socket) {
          this.state = 'connecting';
          this.scheduleReconnect();
        }
      });
    }, delay);
  }
}

function assertArguments(args: readonly string[]): void {
  for (const arg of args) {
    if (arg === '' || /[\s"]/.test(arg)) throw new ControlArgumentError('argument must be a non-empty token', arg);
  }
}

async function readCookie(path: string): Promise<string> {
  let cookie: Buffer;
  try {
    cookie = await readFile(path);
  } catch (error) {
    throw new ControlAuthenticationError(`cannot read the control cookie: ${errorMessage(error)}`);
  }
  if (cookie.length !== 32) throw new ControlAuthenticationError(`control cookie is ${cookie.length} bytes, expected 32`);
  return cookie.toString('hex');
}
