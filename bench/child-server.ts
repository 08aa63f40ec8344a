/**
 * Runs one of the benchmark's servers (bench-child.ts) in a child process and knows its port.
 * The parent owns the child: stop() ends it, and it exits by itself when the parent dies
 * (the IPC channel closes).
 */
import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export type ChildRole = 'socks-backend' | 'download-source' | 'bare-relay';

export interface ChildReady {
  port: number;
  pid: number;
}

export interface ChildServer {
  readonly role: ChildRole;
  readonly port: number;
  readonly pid: number;
  stop(): Promise<void>;
}

const here = path.dirname(fileURLToPath(import.meta.url));
const CHILD_START_TIMEOUT_MS = 15_000;

export class ChildServerStartError extends Error {
  constructor(role: ChildRole, reason: string) {
    super(`bench child ${role} did not start: ${reason}`);
    this.name = 'ChildServerStartError';
  }
}

export function startChildServer(role: ChildRole, args: string[] = [], execArgv: string[] = []): Promise<ChildServer> {
  const child: ChildProcess = fork(path.join(here, 'bench-child.js'), [role, ...args], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new ChildServerStartError(role, `no port within ${CHILD_START_TIMEOUT_MS} ms`));
    }, CHILD_START_TIMEOUT_MS);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new ChildServerStartError(role, `exited with ${code}`));
    });
    child.once('message', (m: ChildReady) => {
      clearTimeout(timer);
      resolve({
        role,
        port: m.port,
        pid: m.pid,
        async stop() {
          if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
          const kill = setTimeout(() => child.kill('SIGKILL'), 5_000);
          await exited;
          clearTimeout(kill);
        },
      });
    });
  });
}
