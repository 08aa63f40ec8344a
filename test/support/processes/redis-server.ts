import { spawn } from 'node:child_process';
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
  stop(): Promise<void>;
}

/** A private redis-server (Debian's, installed by scripts/setup.sh) on loopback, nothing persisted, for one test. */
export async function startRedis(): Promise<RunningRedis> {
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-redis-'));
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--protected-mode', 'yes'], { stdio: 'ignore' });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  // Listening once the port can no longer be bound.
  await pollUntil(`redis-server listening on ${port}`, async () => (child.exitCode === null && !(await portFree(port)) ? true : undefined), 10_000, 50);
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    async pause() {
      child.kill('SIGSTOP');
    },
    async resume() {
      child.kill('SIGCONT');
    },
    async stop() {
      if (child.exitCode === null) {
        child.kill('SIGCONT');
        child.kill('SIGTERM');
      }
      await exited;
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
