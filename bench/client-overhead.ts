/**
 * What the clients add per request: the same requests through the same service with each bare
 * library and through the client's wrapper of it, interleaved (block detection reads each body;
 * nothing is blocked here): undici's fetch, got (SOCKS5 and the HTTP proxy) and axios (the HTTP
 * proxy) in Node; requests and httpx with Debian's python3.
 */
import axios from 'axios';
import got from 'got';
import { HttpProxyAgent } from 'http-proxy-agent';
import { SocksProxyAgent } from 'socks-proxy-agent';
import { fetch, ProxyAgent } from 'undici';
import { ExitpoolSession } from '../clients/node/src/index.js';
import { axiosThrough } from '../clients/node/src/axios.js';
import { gotThrough, gotThroughHttpProxy } from '../clients/node/src/got.js';
import { startService, TEST_PROXY_TOKEN } from '../test/support/fixtures/service.js';
import { runPython } from '../test/support/clients/python.js';
import { ms, percentile, type BenchSection, type Figure } from './report.js';

export interface ClientBenchOptions {
  requests: number;
  rounds: number;
}

export const FULL_CLIENT_OPTIONS: ClientBenchOptions = { requests: 200, rounds: 3 };

/** One library, bare and through the client: each sends one request and reads the whole body. */
interface Pair {
  bare: string;
  client: string;
  sendBare: () => Promise<unknown>;
  sendClient: () => Promise<unknown>;
}

/** p50 / p99 of both, and what the client adds at p50. */
function pairFigures(bare: string, client: string, bareMs: number[], clientMs: number[]): Figure[] {
  const b = [...bareMs].sort((x, y) => x - y);
  const c = [...clientMs].sort((x, y) => x - y);
  const row = (name: string, v: number[]): Figure => ({ name: `${name} (p50 / p99)`, value: `${ms(percentile(v, 0.5), 2)} / ${ms(percentile(v, 0.99), 2)}`, limit: '', withinLimit: null });
  return [row(bare, b), row(client, c), { name: `added by ${client} at p50`, value: ms(percentile(c, 0.5) - percentile(b, 0.5), 2), limit: '', withinLimit: null }];
}

export async function benchClientOverhead(o: ClientBenchOptions = FULL_CLIENT_OPTIONS): Promise<BenchSection> {
  const svc = await startService({ POOL_SIZE: '2', LOG_LEVEL: 'warn' });
  try {
    await svc.waitReady(2, 180_000);
    const proxy = `http://127.0.0.1:${svc.httpPort}`;
    const socks = `127.0.0.1:${svc.socksPort}`;
    const url = svc.whoamiUrl;
    const basic = (user: string): string => `Basic ${Buffer.from(`${user}:${TEST_PROXY_TOKEN}`).toString('base64')}`;
    const session = (key: string): ExitpoolSession => new ExitpoolSession({ key, token: TEST_PROXY_TOKEN, proxy, api: `http://127.0.0.1:${svc.apiPort}` });
    // The bare libraries as a scraper would set them up without the client: one agent, reused,
    // keeping its connections alive, as the client's kept agent per session does.
    const undiciPlain = new ProxyAgent({ uri: proxy, token: basic('bench-plain'), proxyTunnel: false });
    const socksPlain = new SocksProxyAgent(`socks5h://bench-got-socks:${TEST_PROXY_TOKEN}@${socks}`, { keepAlive: true });
    const httpPlain = new HttpProxyAgent(`http://bench-got-http:${TEST_PROXY_TOKEN}@127.0.0.1:${svc.httpPort}`, { keepAlive: true });
    const sessions = { fetch: session('bench-client'), gotSocks: session('bench-got-socks-client'), gotHttp: session('bench-got-http-client'), axios: session('bench-axios-client') };
    const gotOptions = { throwHttpErrors: false, retry: { limit: 0 } } as const;
    const pairs: Pair[] = [
      { bare: "undici's ProxyAgent alone", client: 'ExitpoolSession.fetch', sendBare: async () => (await fetch(url, { dispatcher: undiciPlain })).text(), sendClient: async () => (await sessions.fetch.fetch(url)).text() },
      { bare: 'got with one SocksProxyAgent', client: 'gotThrough (SOCKS5)', sendBare: () => got(url, { ...gotOptions, agent: { http: socksPlain } }).text(), sendClient: () => gotThrough(got, sessions.gotSocks, socks, url) },
      { bare: 'got with one HttpProxyAgent', client: 'gotThroughHttpProxy', sendBare: () => got(url, { ...gotOptions, agent: { http: httpPlain } }).text(), sendClient: () => gotThroughHttpProxy(got, sessions.gotHttp, url) },
      {
        bare: 'axios with its proxy option',
        client: 'axiosThrough (HTTP proxy)',
        sendBare: () => axios.get<string>(url, { responseType: 'text', proxy: { protocol: 'http', host: '127.0.0.1', port: svc.httpPort, auth: { username: 'bench-axios', password: TEST_PROXY_TOKEN } } }),
        sendClient: () => axiosThrough(axios, sessions.axios, { url }),
      },
    ];
    const samples = pairs.map(() => ({ bare: [] as number[], client: [] as number[] }));
    try {
      for (let round = 0; round < o.rounds; round++) {
        for (const [p, pair] of pairs.entries()) {
          const s = samples[p] as (typeof samples)[number];
          for (let i = 0; i < o.requests; i++) {
            let t = performance.now();
            await pair.sendBare();
            s.bare.push(performance.now() - t);
            t = performance.now();
            await pair.sendClient();
            s.client.push(performance.now() - t);
          }
        }
      }
    } finally {
      await undiciPlain.close();
      socksPlain.destroy();
      httpPlain.destroy();
      await Promise.all(Object.values(sessions).map((s) => s.close()));
    }
    // The Python client, the same way: each library alone against the client's wrapper of it.
    const py = await runPython(['bench/python/client_overhead.py', String(o.requests * o.rounds)], {
      EXITPOOL_API: `http://127.0.0.1:${svc.apiPort}`,
      EXITPOOL_TOKEN: TEST_PROXY_TOKEN,
      EXITPOOL_HTTP: `127.0.0.1:${svc.httpPort}`,
      TARGET_URL: svc.whoamiUrl,
    }, undefined, 600_000);
    if (py.code !== 0) throw new Error(`the Python client bench failed: ${py.stderr}`);
    const pySamples = JSON.parse(py.stdout) as Record<'requests' | 'httpx', { direct: number[]; client: number[] }>;
    return {
      title: 'Clients: what each adds per request',
      method: `Pool of 2 on the private network, ${o.rounds} rounds of ${o.requests} plain HTTP requests to whoami per library, alternating the bare library (one agent, reused, keep-alive) and the client's wrapper of it, timed to the whole body: undici's fetch, got over SOCKS5 and over the HTTP proxy, axios over the HTTP proxy; then as many with Debian's python3 for requests and httpx (a plain Session/Client with the proxy against requests_session()/httpx_client()).`,
      figures: [
        ...pairs.flatMap((pair, p) => pairFigures(pair.bare, pair.client, samples[p]?.bare ?? [], samples[p]?.client ?? [])),
        ...pairFigures('Python: requests alone', 'ExitpoolSession.requests_session()', pySamples.requests.direct, pySamples.requests.client),
        ...pairFigures('Python: httpx alone', 'ExitpoolSession.httpx_client()', pySamples.httpx.direct, pySamples.httpx.client),
      ],
    };
  } finally {
    await svc.stop();
  }
}
