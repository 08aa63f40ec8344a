import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Testnet } from '../../internal/testnet/index.js';
import { fileURLToPath } from 'node:url';
import { sharedTestnet } from './testnet-fixture.js';
import { MAX_POOL_SIZE, PORTS_PER_INSTANCE } from '../../shared/config/limits.js';

/** Known credentials, so tests need not scrape the first-boot log lines. */
export const TEST_PROXY_TOKEN = 'tp_TestProxyToken0000000001';
export const TEST_ADMIN_PASSWORD = 'test-admin-password';

export interface RunningService {
  readonly pid: number;
  readonly socksPort: number;
  readonly httpPort: number;
  readonly apiPort: number;
  readonly dataDir: string;
  /** INSTANCE_PORT_BASE the service was given (instances' TCP fallback block). */
  readonly instancePortBase: number;
  readonly net: Testnet;
  /** The whoami URL by hostname (resolved by the exits, never locally). */
  readonly whoamiUrl: string;
  /** Everything the service printed (stdout and stderr), for assertions and failure reports. */
  output(): string;
  /** fetch() against the API with an optional bearer credential. */
  api(pathname: string, init?: { method?: string; bearer?: string; body?: unknown; headers?: Record<string, string> }): Promise<Response>;
  /** A sign-in credential for the admin (POST /api/auth/login). */
  login(): Promise<string>;
  /** Resolves once GET /health answers 200 and `ready` instances have bootstrapped. */
  waitReady(ready: number, timeoutMs?: number): Promise<void>;
  /** SIGTERM, wait for a clean exit (SIGKILL after the grace); returns the exit code. */
  stop(): Promise<number | null>;
}

const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const c of live) c.kill('SIGKILL');
});

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

async function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

/**
 * A block of ports for the instances (2 per instance) that is free now and holds none of
 * `taken` (ports already picked for the listeners but not bound yet; the service refuses to
 * start when its instance ports overlap a listener).
 */
async function freeBlock(size: number, taken: readonly number[]): Promise<number> {
  // The configuration refuses a listener inside the whole instance range (MAX_POOL_SIZE
  // instances), whatever the pool size: keep the listeners out of all of it.
  const range = MAX_POOL_SIZE * PORTS_PER_INSTANCE;
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = 30_000 + Math.floor(Math.random() * 2_500) * 10;
    if (taken.some((p) => p >= base && p < base + range)) continue;
    const checks = await Promise.all(Array.from({ length: size }, (_, i) => portFree(base + i)));
    if (checks.every(Boolean)) return base;
  }
  throw new Error('no free port block found');
}

/**
 * Ports for a service started outside startService (pm2, another user): its three listeners
 * from the OS, and a block for `instances` instances that is free now. Fixed or random ports
 * can collide with the ephemeral ports other tests' sockets hold.
 */
export async function servicePorts(instances: number): Promise<{ socks: number; http: number; api: number; instanceBase: number }> {
  const [socks, http, api] = [await freePort(), await freePort(), await freePort()];
  return { socks, http, api, instanceBase: await freeBlock(instances * PORTS_PER_INSTANCE, [socks, http, api]) };
}

/**
 * Starts the real `bin/exitpool` on the shared private Tor network, configured by `env` on top
 * of test defaults (free ports, a fresh DATA_DIR, known credentials, private-network-only).
 */
export async function startService(env: Record<string, string> = {}): Promise<RunningService> {
  const testnet = await sharedTestnet();
  // A block for 64 instances: tests resize the pool beyond its starting size.
  const { socks: socksPort, http: httpPort, api: apiPort, instanceBase: instancePortBase } = await servicePorts(64);
  const poolSize = Number(env.POOL_SIZE ?? '4');
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-e2e-'));
  const fullEnv: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: process.env.HOME ?? '/root',
    POOL_SIZE: String(poolSize),
    SOCKS_PORT: String(socksPort),
    HTTP_PORT: String(httpPort),
    API_PORT: String(apiPort),
    INSTANCE_PORT_BASE: String(instancePortBase),
    DATA_DIR: dataDir,
    PROXY_WORKERS: '2',
    SPAWN_STAGGER: '0',
    LOG_LEVEL: 'info',
    PROXY_TOKEN: TEST_PROXY_TOKEN,
    ADMIN_PASSWORD: TEST_ADMIN_PASSWORD,
    TOR_BINARY: testnet.torBinary,
    TOR_EXTRA_CONFIG: testnet.clientTorrcLines.join('\n'),
    EXITPOOL_PRIVATE_NETWORK_ONLY: '1',
    ...env,
  };
  // bin/exitpool imports dist/supervisor/cli.js; run the CLI of the tree these tests were
  // compiled into, so the test exercises exactly that build.
  const cli = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'supervisor', 'cli.js');
  const child = spawn(process.execPath, [cli], { env: fullEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  live.add(child);
  let out = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => {
    live.delete(child);
    resolve(code);
  }));
  const base = `http://127.0.0.1:${apiPort}`;
  const service: RunningService = {
    pid: child.pid as number,
    socksPort,
    httpPort,
    apiPort,
    dataDir,
    instancePortBase: Number(fullEnv.INSTANCE_PORT_BASE),
    net: testnet,
    whoamiUrl: `http://whoami.testnet:${testnet.whoami.port}/`,
    output: () => out,
    async api(pathname, init = {}) {
      const headers: Record<string, string> = { ...(init.headers ?? {}) };
      if (init.bearer) headers.Authorization = `Bearer ${init.bearer}`;
      let body: string | undefined;
      if (init.body !== undefined) {
        headers['Content-Type'] ??= 'application/json';
        body = typeof init.body === 'string' ? init.body : JSON.stringify(init.body);
      }
      return fetch(base + pathname, { method: init.method ?? 'GET', headers, ...(body === undefined ? {} : { body }) });
    },
    async login() {
      const r = await service.api('/api/auth/login', { method: 'POST', body: { user: 'admin', password: TEST_ADMIN_PASSWORD } });
      if (r.status !== 200) throw new Error(`login failed: ${r.status} ${await r.text()}`);
      return ((await r.json()) as { token: string }).token;
    },
    async waitReady(ready, timeoutMs = 90_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        if (child.exitCode !== null) throw new Error(`service exited (${child.exitCode}):\n${out}`);
        try {
          const p = await service.api('/api/pool', { bearer: await adminBearer() });
          if (p.status === 200) {
            const pool = (await p.json()) as { ready: number; routable: number };
            if (pool.ready >= ready && pool.routable >= Math.min(ready, 1)) return;
          }
        } catch {
          // not listening yet
        }
        if (Date.now() > deadline) throw new Error(`service not ready (${ready}) within ${timeoutMs} ms:\n${out.slice(-4000)}`);
        await new Promise((r) => setTimeout(r, 250));
      }
    },
    async stop() {
      if (child.exitCode !== null) {
        fs.rmSync(dataDir, { recursive: true, force: true });
        return child.exitCode;
      }
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      const code = await exited;
      clearTimeout(timer);
      fs.rmSync(dataDir, { recursive: true, force: true });
      return code;
    },
  };
  let cachedJwt: string | undefined;
  const adminBearer = async (): Promise<string> => (cachedJwt ??= await service.login());
  return service;
}
