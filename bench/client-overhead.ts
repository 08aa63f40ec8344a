/**
 * What the clients add per request: the same requests through the same service's HTTP proxy with
 * undici's ProxyAgent alone and through ExitpoolSession.fetch (block detection reads each body;
 * nothing is blocked here), then Python's requests alone and through the Python client.
 */
import { fetch, ProxyAgent } from 'undici';
import { ExitpoolSession } from '../clients/node/src/index.js';
import { startService, TEST_PROXY_TOKEN } from '../test/support/fixtures/service.js';
import { runPython } from '../test/support/clients/python.js';
import { ms, percentile, type BenchSection } from './report.js';

export interface ClientBenchOptions {
  requests: number;
  rounds: number;
}

export const FULL_CLIENT_OPTIONS: ClientBenchOptions = { requests: 200, rounds: 3 };

export async function benchClientOverhead(o: ClientBenchOptions = FULL_CLIENT_OPTIONS): Promise<BenchSection> {
  const svc = await startService({ POOL_SIZE: '2', LOG_LEVEL: 'warn' });
  try {
    await svc.waitReady(2, 180_000);
    const proxy = `http://127.0.0.1:${svc.httpPort}`;
    const plain = new ProxyAgent({ uri: proxy, token: `Basic ${Buffer.from(`bench-plain:${TEST_PROXY_TOKEN}`).toString('base64')}`, proxyTunnel: false });
    const session = new ExitpoolSession({ key: 'bench-client', token: TEST_PROXY_TOKEN, proxy, api: `http://127.0.0.1:${svc.apiPort}` });
    const direct: number[] = [];
    const wrapped: number[] = [];
    try {
      for (let round = 0; round < o.rounds; round++) {
        for (let i = 0; i < o.requests; i++) {
          let t = performance.now();
          await (await fetch(svc.whoamiUrl, { dispatcher: plain })).text();
          direct.push(performance.now() - t);
          t = performance.now();
          await (await session.fetch(svc.whoamiUrl)).text();
          wrapped.push(performance.now() - t);
        }
      }
    } finally {
      await plain.close();
      await session.close();
    }
    direct.sort((a, b) => a - b);
    wrapped.sort((a, b) => a - b);
    const added = percentile(wrapped, 0.5) - percentile(direct, 0.5);
    // The Python client, the same way: requests alone against ExitpoolSession.requests_session().
    const py = await runPython(['bench/python/client_overhead.py', String(o.requests * o.rounds)], {
      EXITPOOL_API: `http://127.0.0.1:${svc.apiPort}`,
      EXITPOOL_TOKEN: TEST_PROXY_TOKEN,
      EXITPOOL_HTTP: `127.0.0.1:${svc.httpPort}`,
      TARGET_URL: svc.whoamiUrl,
    }, undefined, 300_000);
    if (py.code !== 0) throw new Error(`the Python client bench failed: ${py.stderr}`);
    const samples = JSON.parse(py.stdout) as { direct: number[]; client: number[] };
    const pyDirect = samples.direct.sort((a, b) => a - b);
    const pyClient = samples.client.sort((a, b) => a - b);
    return {
      title: 'Clients: what each adds per request',
      method: `Pool of 2 on the private network, ${o.rounds} rounds of ${o.requests} plain HTTP requests to whoami through the HTTP proxy, alternating undici's ProxyAgent alone and ExitpoolSession.fetch (same proxy, keep-alive), timed to the whole body; then as many with Debian's python3, alternating a plain requests.Session and ExitpoolSession.requests_session().`,
      figures: [
        { name: 'undici ProxyAgent alone (p50 / p99)', value: `${ms(percentile(direct, 0.5), 2)} / ${ms(percentile(direct, 0.99), 2)}`, limit: '', withinLimit: null },
        { name: 'ExitpoolSession.fetch (p50 / p99)', value: `${ms(percentile(wrapped, 0.5), 2)} / ${ms(percentile(wrapped, 0.99), 2)}`, limit: '', withinLimit: null },
        { name: 'added by the client at p50', value: ms(added, 2), limit: '', withinLimit: null },
        { name: 'Python: requests alone (p50 / p99)', value: `${ms(percentile(pyDirect, 0.5), 2)} / ${ms(percentile(pyDirect, 0.99), 2)}`, limit: '', withinLimit: null },
        { name: 'Python: ExitpoolSession.requests_session() (p50 / p99)', value: `${ms(percentile(pyClient, 0.5), 2)} / ${ms(percentile(pyClient, 0.99), 2)}`, limit: '', withinLimit: null },
        { name: 'Python: added by the client at p50', value: ms(percentile(pyClient, 0.5) - percentile(pyDirect, 0.5), 2), limit: '', withinLimit: null },
      ],
    };
  } finally {
    await svc.stop();
  }
}
