import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A fake tor control port for component tests: speaks the reply format of control-spec §2.3,
 * checks cookie authentication, and lets a test script answers (or withhold them), push events
 * and drop connections on cue.
 */

/** Returned by a handler to withhold the answer for good (a tor that never replies). */
export const NO_ANSWER = Symbol('no answer');
/** A string is sent as is; undefined falls through to the default behaviour. */
export type Answer = string | typeof NO_ANSWER | undefined;
export type Handler = (command: string, connection: FakeConnection) => Answer | Promise<Answer>;

export interface FakeConnection {
  socket: Socket;
  authenticated: boolean;
  events: string[];
}

export class FakeControlServer {
  readonly commands: string[] = [];
  readonly connections = new Set<FakeConnection>();
  connectionCount = 0;
  handler: Handler | undefined;
  private server: Server | undefined;
  private dir = '';
  socketPath = '';
  cookieFile = '';
  cookie = randomBytes(32);

  /** Listens in a new temp directory, or again in `dir` (same socket path and cookie file). */
  async start(dir?: string): Promise<void> {
    this.dir = dir ?? (await mkdtemp(join(tmpdir(), 'fake-ctl-')));
    this.socketPath = join(this.dir, 'control.sock');
    this.cookieFile = join(this.dir, 'control_auth_cookie');
    await writeFile(this.cookieFile, this.cookie);
    this.server = createServer((socket) => this.accept(socket));
    await new Promise<void>((resolve) => this.server!.listen(this.socketPath, resolve));
  }

  /** Sends raw text (CRLF lines) to every authenticated connection. */
  broadcast(raw: string): void {
    for (const c of this.connections) if (c.authenticated) c.socket.write(raw);
  }

  dropConnections(): void {
    for (const c of this.connections) c.socket.destroy();
  }

  async waitFor(predicate: () => boolean, timeoutMs = 5_000): Promise<void> {
    const until = Date.now() + timeoutMs;
    while (!predicate()) {
      if (Date.now() > until) throw new Error('condition not met in time');
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  get directory(): string {
    return this.dir;
  }

  /** Closes the listener and every connection; keepFiles leaves the directory for a restart. */
  async stop(options: { keepFiles?: boolean } = {}): Promise<void> {
    this.dropConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
    this.server = undefined;
    if (!options.keepFiles) await rm(this.dir, { recursive: true, force: true });
  }

  private accept(socket: Socket): void {
    const connection: FakeConnection = { socket, authenticated: false, events: [] };
    this.connections.add(connection);
    this.connectionCount++;
    socket.on('close', () => this.connections.delete(connection));
    socket.on('error', () => undefined);
    let buffered = '';
    let chain = Promise.resolve();
    socket.on('data', (chunk) => {
      buffered += chunk.toString('utf8');
      let nl: number;
      while ((nl = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, nl).replace(/\r$/, '');
        buffered = buffered.slice(nl + 1);
        // Answers go out in command order, as tor's do.
        chain = chain.then(async () => {
          const answer = await this.answer(line, connection);
          if (typeof answer === 'string' && !socket.destroyed) socket.write(answer);
        });
      }
    });
  }

  private async answer(line: string, connection: FakeConnection): Promise<Answer> {
    this.commands.push(line);
    const custom = this.handler ? await this.handler(line, connection) : undefined;
    if (custom !== undefined) return custom;
    return this.defaultAnswer(line, connection);
  }

  private defaultAnswer(line: string, connection: FakeConnection): Answer {
    const [verb, ...args] = line.split(' ');
    if (verb === 'AUTHENTICATE') {
      if (args[0]?.toLowerCase() === this.cookie.toString('hex')) {
        connection.authenticated = true;
        return '250 OK\r\n';
      }
      return '515 Authentication failed: Wrong length on authentication cookie.\r\n';
    }
    if (!connection.authenticated) return '514 Authentication required.\r\n';
    if (verb === 'SETEVENTS') {
      connection.events = args;
      return '250 OK\r\n';
    }
    return `510 Unrecognized command "${verb}"\r\n`;
  }
}
