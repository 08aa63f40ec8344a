/**
 * HAProxy in TCP mode, round robin over some servers, listening on loopback: the balancer in
 * front of several exitpool nodes (test/e2e/fleet-nodes.test.ts) and the peer a user would put
 * in front of several tors instead of exitpool (bench/peers.ts). Debian's package, installed by
 * scripts/setup.sh. Run in the foreground (-db) so this process owns it.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '../network/free-ports.js';
import { pollUntil } from '../waiting.js';

export class HaproxyMissingError extends Error {
  constructor() {
    super('haproxy is not installed: scripts/setup.sh installs it (npm test and npm run bench run it)');
    this.name = 'HaproxyMissingError';
  }
}

export interface RunningHaproxy {
  readonly port: number;
  readonly pid: number;
  /** `haproxy -v`'s first line. */
  readonly version: string;
  stop(): Promise<void>;
}

/** A round-robin TCP frontend over `servers`, each as HAProxy writes an address (`unix@/path`, `127.0.0.1:1080`). */
export async function startHaproxy(servers: readonly string[], options: { healthChecks?: boolean } = {}): Promise<RunningHaproxy> {
  const probe = spawnSync('haproxy', ['-v'], { encoding: 'utf8' });
  if (probe.error || probe.status !== 0) throw new HaproxyMissingError();
  const version = probe.stdout.split('\n')[0] ?? 'haproxy';
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-haproxy-'));
  const config = [
    'global',
    '  maxconn 4096',
    'defaults',
    '  mode tcp',
    '  timeout connect 10s',
    '  timeout client 120s',
    '  timeout server 120s',
    'frontend front',
    `  bind 127.0.0.1:${port}`,
    '  default_backend servers',
    'backend servers',
    '  balance roundrobin',
    // With health checks a server that stops accepting is out of the rotation within a second.
    ...servers.map((address, i) => `  server s${i} ${address}${options.healthChecks ? ' check inter 300 fall 1 rise 1' : ''}`),
    '',
  ].join('\n');
  const file = path.join(dir, 'haproxy.cfg');
  fs.writeFileSync(file, config);
  const child: ChildProcess = spawn('haproxy', ['-f', file, '-db'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  // An HAProxy that refuses its configuration exits at once: say why now, not after the wait.
  const up = await pollUntil(
    `haproxy listening on ${port}`,
    () =>
      child.exitCode !== null
        ? ('exited' as const)
        : new Promise<'listening' | undefined>((resolve) => {
            const s = net.connect({ host: '127.0.0.1', port }, () => {
              s.destroy();
              resolve('listening');
            });
            s.once('error', () => resolve(undefined));
          }),
    10_000,
    50,
  );
  if (up === 'exited') throw new Error(`haproxy exited at start: ${stderr}`);
  return {
    port,
    pid: child.pid as number,
    version,
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
