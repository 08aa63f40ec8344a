/**
 * Runs the real proxy workers (the compiled workers/main.js, role 'proxy', through the real
 * WorkerManager and node:cluster) behind a small in-process stand-in for the supervisor. The
 * stand-in answers exactly the IPC a proxy worker uses: `credentials.proxy` (a snapshot with one
 * token digest, so every connection runs the real token check), `route` (every session to one
 * backend SOCKS port) and `ping`, and it tallies the `accounting` notices so a benchmark can
 * check that the totals came back exact.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ProxyCredentialSnapshot } from '../shared/auth/credential-snapshot.js';
import { digestTokenSecret } from '../shared/auth/token-format.js';
import { encodeWorkerConfig, loadConfig, WORKER_CONFIG_ENV } from '../shared/config/index.js';
import type { CloseRecord, OpenedRoute, RouteParams, RouteResult } from '../shared/ipc/protocol.js';
import { WorkerManager } from '../supervisor/cluster/worker-manager.js';
import { quietLogger } from '../test/support/fakes/quiet-logger.js';
import { freePorts } from '../test/support/network/free-ports.js';
import type { SocksCredentials } from '../test/support/clients/socks5-client.js';

const here = path.dirname(fileURLToPath(import.meta.url));

/** The proxy token every benchmark client presents (issued shape: tp_ + 22 base62 characters). */
export const BENCH_PROXY_TOKEN = 'tp_BenchProxyToken0000001';

export interface ProxyHarnessOptions {
  workers: number;
  /** Where every route points: the stand-in for a tor instance's SocksPort. */
  /** The stand-in instance: a SOCKS5 server on TCP, or on a Unix socket (`path`) as tor's SocksPort is. */
  backend: { host: string; port: number; path?: string };
  /** Node flags for the worker processes (e.g. --cpu-prof); default: none. */
  execArgv?: string[];
  /** Extra configuration variables for the workers (LOG_LEVEL and the like). */
  env?: Record<string, string>;
}

/** What the workers reported back, summed over every accounting batch so far. */
export interface AccountingTally {
  /** Connections routed: by a round trip to the supervisor, or from a worker's lease (its `opened` records). */
  routes: number;
  closes: number;
  ok: number;
  failed: number;
  bytesUp: number;
  bytesDown: number;
  routeRttMs: number[];
  /** The workers' own dial times: from starting the upstream dial to the backend's success reply. */
  dialMs: number[];
}

export interface ProxyHarness {
  readonly socksPort: number;
  readonly httpPort: number;
  readonly tally: AccountingTally;
  credentials(sessionKey: string): SocksCredentials;
  workerPids(): number[];
  /** Resolves once `closes` finished connections have been reported (batches arrive every ACCOUNTING_FLUSH_MS). */
  waitForCloses(closes: number, timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}

export class AccountingMismatchError extends Error {
  constructor(expected: number, tally: AccountingTally) {
    super(`expected ${expected} closes reported, got ${tally.closes} (routes ${tally.routes})`);
    this.name = 'AccountingMismatchError';
  }
}

export async function startProxyHarness(options: ProxyHarnessOptions): Promise<ProxyHarness> {
  const [socksPort, httpPort] = (await freePorts(2)) as [number, number];
  const config = loadConfig({
    SOCKS_PORT: String(socksPort),
    HTTP_PORT: String(httpPort),
    PROXY_WORKERS: String(options.workers),
    LOG_LEVEL: 'warn',
    ...options.env,
  });
  const snapshot: ProxyCredentialSnapshot = {
    version: 1,
    authDisabled: false,
    tokens: [{ id: 'bench', scope: 'proxy', digest: digestTokenSecret(BENCH_PROXY_TOKEN) }],
  };
  const tally: AccountingTally = { routes: 0, closes: 0, ok: 0, failed: 0, bytesUp: 0, bytesDown: 0, routeRttMs: [], dialMs: [] };
  const closeListeners = new Set<() => void>();
  const { host, port, path: backendPath } = options.backend;

  const manager = new WorkerManager({
    exec: path.join(here, '..', 'workers', 'main.js'),
    specs: [{ role: 'proxy', count: options.workers }],
    env: { [WORKER_CONFIG_ENV]: encodeWorkerConfig(config) },
    execArgv: options.execArgv ?? [],
    log: quietLogger(),
    attach(h) {
      h.endpoint.handle('ping', () => ({ receivedAt: Date.now() }));
      h.endpoint.handle('credentials.proxy', () => snapshot);
      h.endpoint.handle('route', (p: RouteParams): RouteResult => {
        tally.routes += 1;
        return { ok: true, instance: 0, host, port, ...(backendPath === undefined ? {} : { path: backendPath }), key: p.key, session: p.key === null ? null : 1, lease: p.key !== null, exitIp: '' };
      });
      h.endpoint.onNotice('accounting', ({ opened, closes, routeRttMs }: { opened: OpenedRoute[]; closes: CloseRecord[]; routeRttMs: number[] }) => {
        // Connections a worker routed from its lease, without asking: routed all the same.
        tally.routes += opened.length;
        for (const c of closes) {
          tally.closes += 1;
          if (c.ok) tally.ok += 1;
          else tally.failed += 1;
          tally.bytesUp += c.bytesUp;
          tally.bytesDown += c.bytesDown;
          if (c.latencyMs !== null) tally.dialMs.push(c.latencyMs);
        }
        for (const ms of routeRttMs) tally.routeRttMs.push(ms);
        for (const l of closeListeners) l();
      });
    },
  });
  await manager.start();

  return {
    socksPort,
    httpPort,
    tally,
    credentials: (sessionKey) => ({ username: sessionKey, password: BENCH_PROXY_TOKEN }),
    workerPids: () => manager.handles('proxy').map((h) => h.worker.process.pid as number),
    waitForCloses(closes, timeoutMs = 10_000) {
      if (tally.closes >= closes) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const check = (): void => {
          if (tally.closes < closes) return;
          clearTimeout(timer);
          closeListeners.delete(check);
          resolve();
        };
        const timer = setTimeout(() => {
          closeListeners.delete(check);
          reject(new AccountingMismatchError(closes, tally));
        }, timeoutMs);
        closeListeners.add(check);
      });
    },
    stop: () => manager.stop(),
  };
}
