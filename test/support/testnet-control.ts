import { readFile } from 'node:fs/promises';
import { connect, type Socket } from 'node:net';

/** Reply to one control-port command: status code and the text of every reply line. */
export interface ControlReply {
  readonly code: number;
  readonly lines: readonly string[];
}

export class ControlCommandError extends Error {
  constructor(
    readonly command: string,
    readonly reply: ControlReply,
  ) {
    super(`tor control command "${command.split(' ')[0] ?? ''}" failed: ${reply.code} ${reply.lines.join(' | ')}`);
    this.name = 'ControlCommandError';
  }
}

const COMMAND_TIMEOUT_MS = 15_000;

/**
 * A deliberately minimal tor control-port client for tests (GETINFO, SIGNAL): one command at a
 * time, no asynchronous events. The production client lives in supervisor/tor/.
 */
export class TestnetControl {
  private readonly socket: Socket;
  private buffer = '';
  private pendingLines: string[] = [];
  private dataBlock: string[] | undefined;
  private waiter: { resolve: (reply: ControlReply) => void; reject: (err: Error) => void } | undefined;
  private queue: Promise<unknown> = Promise.resolve();
  private closedError: Error | undefined;

  private constructor(socket: Socket) {
    this.socket = socket;
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => this.onData(chunk));
    socket.on('error', (err) => this.fail(err));
    socket.on('close', () => this.fail(new Error('control connection closed')));
  }

  static async connect(port: number, cookieFile: string): Promise<TestnetControl> {
    const socket = await new Promise<Socket>((resolve, reject) => {
      const s = connect({ host: '127.0.0.1', port }, () => {
        s.off('error', reject);
        resolve(s);
      });
      s.once('error', reject);
    });
    const control = new TestnetControl(socket);
    const cookie = await readFile(cookieFile);
    await control.command(`AUTHENTICATE ${cookie.toString('hex')}`);
    return control;
  }

  private fail(err: Error): void {
    this.closedError ??= err;
    const waiter = this.waiter;
    this.waiter = undefined;
    waiter?.reject(err);
  }

  private onData(chunk: string): void {
    this.buffer += chunk;
    let newline: number;
    while ((newline = this.buffer.indexOf('\r\n')) >= 0) {
      const line = this.buffer.slice(0, newline);
      this.buffer = this.buffer.slice(newline + 2);
      this.onLine(line);
    }
  }

  private onLine(line: string): void {
    if (this.dataBlock) {
      if (line === '.') {
        this.pendingLines.push(this.dataBlock.join('\n'));
        this.dataBlock = undefined;
      } else {
        this.dataBlock.push(line.startsWith('..') ? line.slice(1) : line);
      }
      return;
    }
    const code = Number(line.slice(0, 3));
    const separator = line[3];
    const text = line.slice(4);
    if (separator === '+') {
      this.pendingLines.push(text);
      this.dataBlock = [];
      return;
    }
    this.pendingLines.push(text);
    if (separator === ' ') {
      const reply: ControlReply = { code, lines: this.pendingLines };
      this.pendingLines = [];
      const waiter = this.waiter;
      this.waiter = undefined;
      waiter?.resolve(reply);
    }
  }

  /** Sends one command; rejects with ControlCommandError unless tor answers 2xx. */
  command(line: string): Promise<ControlReply> {
    const run = async (): Promise<ControlReply> => {
      if (this.closedError) throw this.closedError;
      const reply = await new Promise<ControlReply>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`control command timed out: ${line.split(' ')[0] ?? ''}`)), COMMAND_TIMEOUT_MS);
        this.waiter = {
          resolve: (r) => {
            clearTimeout(timer);
            resolve(r);
          },
          reject: (e) => {
            clearTimeout(timer);
            reject(e);
          },
        };
        this.socket.write(`${line}\r\n`);
      });
      if (reply.code < 200 || reply.code >= 300) throw new ControlCommandError(line, reply);
      return reply;
    };
    const result = this.queue.then(run, run);
    this.queue = result.catch(() => undefined);
    return result;
  }

  /** Value of one GETINFO key (single-line or data-block form). */
  async getInfo(key: string): Promise<string> {
    const reply = await this.command(`GETINFO ${key}`);
    const prefix = `${key}=`;
    const entry = reply.lines.find((l) => l.startsWith(prefix));
    if (entry === undefined) throw new ControlCommandError(`GETINFO ${key}`, reply);
    // Data-block replies put the value on the following pendingLines element.
    if (entry === prefix) {
      const index = reply.lines.indexOf(entry);
      return reply.lines[index + 1] ?? '';
    }
    return entry.slice(prefix.length);
  }

  async signal(name: 'NEWNYM' | 'HUP' | 'SHUTDOWN' | 'HALT'): Promise<void> {
    await this.command(`SIGNAL ${name}`);
  }

  close(): void {
    this.closedError ??= new Error('control connection closed by us');
    this.socket.destroy();
  }
}
