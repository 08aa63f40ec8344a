import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort, portFree } from '../network/free-ports.js';
import { pollUntil } from '../waiting.js';

export interface RunningRedis {
  readonly port: number;
  readonly url: string;
  /** Stops the server answering (SIGSTOP: connections stay open, commands wait) until resume(). */
  pause(): Promise<void>;
  resume(): Promise<void>;
  /** Stops the server (SIGTERM) and starts it again on the same port and directory; with `persist`, its data comes back. */
  restart(options?: { downForMs?: number; whileDown?: () => Promise<void> }): Promise<void>;
  stop(): Promise<void>;
}

/**
 * A private redis-server (Debian's, installed by scripts/setup.sh) on loopback for one test;
 * nothing persisted unless `persist` (an append-only file in its own directory).
 */
export async function startRedis(options: { persist?: boolean } = {}): Promise<RunningRedis> {
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-redis-'));
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', options.persist ? 'yes' : 'no', '--appendfsync', 'always', '--dir', dir, '--protected-mode', 'yes'];
  let child: ChildProcess;
  let exited: Promise<void>;
  const launch = async (): Promise<void> => {
    const c = spawn('redis-server', args, { stdio: 'ignore' });
    child = c;
    exited = new Promise<void>((resolve) => c.once('exit', () => resolve()));
    // Listening once the port can no longer be bound.
    await pollUntil(`redis-server listening on ${port}`, async () => (c.exitCode === null && !(await portFree(port)) ? true : undefined), 10_000, 50);
  };
  const halt = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGCONT');
      child.kill('SIGTERM');
    }
    await exited;
  };
  await launch();
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    async pause() {
      child.kill('SIGSTOP');
    },
    async resume() {
      child.kill('SIGCONT');
    },
    async restart(o = {}) {
      await halt();
      await o.whileDown?.();
      if (o.downForMs) await new Promise((resolve) => setTimeout(resolve, o.downForMs));
      await launch();
    },
    async stop() {
      await halt();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
