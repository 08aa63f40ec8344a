import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';

export interface EchoStats {
  /** Connections the echo server accepted since it started. */
  accepted: number;
  /** Connections open now. */
  open: number;
}

/**
 * The parent side of fault-echo-child: spawns the echo server process (it inherits this
 * process's descriptor limit), learns its port, asks it for counters, and stops it.
 */
export class EchoProcess {
  private readonly pending: ((s: EchoStats) => void)[] = [];

  private constructor(
    private readonly child: ChildProcess,
    readonly port: number,
    lines: readline.Interface,
  ) {
    lines.on('line', (line) => {
      const waiter = this.pending.shift();
      if (waiter) waiter(JSON.parse(line) as EchoStats);
    });
  }

  static async start(): Promise<EchoProcess> {
    const entry = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'processes', 'echo-child.js');
    const child = spawn(process.execPath, [entry], { stdio: ['pipe', 'pipe', 'inherit'] });
    const lines = readline.createInterface({ input: child.stdout as NodeJS.ReadableStream });
    const port = await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('echo server did not report its port within 10 s')), 10_000);
      child.once('exit', (code) => reject(new Error(`echo server exited early (${code})`)));
      lines.once('line', (line) => {
        clearTimeout(timer);
        resolve((JSON.parse(line) as { port: number }).port);
      });
    });
    return new EchoProcess(child, port, lines);
  }

  get pid(): number {
    return this.child.pid as number;
  }

  /** The destination as the exits resolve it (*.testnet is 127.0.0.1 on the test network). */
  get host(): string {
    return 'echo.testnet';
  }

  stats(): Promise<EchoStats> {
    return new Promise((resolve) => {
      this.pending.push(resolve);
      this.child.stdin?.write('stats\n');
    });
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    this.child.stdin?.end();
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(timer);
  }
}
