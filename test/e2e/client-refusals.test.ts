/**
 * What the proxy says to a client's username, end to end on the private network, with one
 * service for the file:
 *
 * - the refusal matrix: a session asking for a country without exits (zz), through each client
 *   library on each listener it supports, surfaces as the typed error (ProxyRefusedError with the
 *   service's reason over the HTTP proxy, an `https://` URL so that it is a refused CONNECT;
 *   SocksReplyError 3 over SOCKS5), whether the library shows the proxy's answer or hides it (then
 *   the client asks GET /api/sessions/{key}/refusal). Cells that do not exist: Scrapy and Crawlee
 *   over SOCKS5 (neither library takes a SOCKS5 proxy);
 * - the gateways' username dialects, with curl on both listeners: Oxylabs' `cc-`/`sessid-`,
 *   Decodo's `sessionduration-`, and an unsupported parameter refused on both.
 */
import { expect } from 'chai';
import { Configuration, log as crawleeLog, LogLevel as CrawleeLogLevel, ProxyConfiguration } from '@crawlee/core';
import { HttpCrawler } from '@crawlee/http';
import axios from 'axios';
import got from 'got';
import { ExitpoolSession, ProxyRefusedError, SocksReplyError } from '../../clients/node/src/index.js';
import { axiosThrough } from '../../clients/node/src/axios.js';
import { ExitpoolCrawlee } from '../../clients/node/src/crawlee.js';
import { gotThrough, gotThroughHttpProxy } from '../../clients/node/src/got.js';
import type { SessionView } from '../../shared/api/views.js';
import { HealApi } from '../support/clients/api-client.js';
import { curlHttp, curlSocks } from '../support/clients/curl.js';
import { runPython } from '../support/clients/python.js';
import { TEST_PROXY_TOKEN, withService } from '../support/fixtures/service.js';

async function failureOf(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (e) {
    return e;
  }
  throw new Error('it did not fail');
}

describe('clients and the proxy’s answers: the refusal matrix, the username dialects (real service, private network)', function () {
  this.timeout(120_000);
  const suite = withService({ POOL_SIZE: '2' });
  const httpsUrl = (): string => suite.svc.whoamiUrl.replace(/^http:/, 'https:');
  const socks = (): string => `127.0.0.1:${suite.svc.socksPort}`;
  const session = (key: string): ExitpoolSession =>
    new ExitpoolSession({ key, token: TEST_PROXY_TOKEN, proxy: `http://127.0.0.1:${suite.svc.httpPort}`, api: `http://127.0.0.1:${suite.svc.apiPort}`, socks: socks(), choices: { countries: ['zz'] } });

  /** The typed refusal of the HTTP proxy for a country without exits; `source`: whether the client read it or asked. */
  function expectHttpRefusal(failure: unknown, source: 'proxy' | 'service'): void {
    expect(failure, String(failure)).to.be.instanceOf(ProxyRefusedError);
    const e = failure as ProxyRefusedError;
    expect([e.status, e.proxyStatus.error, e.source, e.retryable]).to.deep.equal([503, 'destination_unavailable', source, false]);
    expect(e.proxyStatus.details).to.match(/^no exit in zz/);
    if (source === 'service') expect(e.reason).to.equal('no_exit_in_country');
  }

  function expectSocksRefusal(failure: unknown): void {
    expect(failure, String(failure)).to.be.instanceOf(SocksReplyError);
    const e = failure as SocksReplyError;
    expect([e.code, e.reason, e.retryable]).to.deep.equal([3, 'no_exit_in_country', false]);
  }

  describe('the refusal matrix: Node', () => {
    const cells: [string, 'http' | 'socks5', (s: ExitpoolSession) => Promise<unknown>][] = [
      ['fetch (undici)', 'http', (s) => s.fetch(httpsUrl())],
      ['got', 'http', (s) => gotThroughHttpProxy(got, s, httpsUrl())],
      ['got', 'socks5', (s) => gotThrough(got, s, socks(), suite.svc.whoamiUrl)],
      ['axios', 'http', (s) => axiosThrough(axios, s, { url: httpsUrl() })],
      ['axios', 'socks5', (s) => axiosThrough(axios, s, { url: suite.svc.whoamiUrl }, socks())],
    ];
    for (const [client, listener, send] of cells) {
      it(`${client} × ${listener === 'http' ? 'the HTTP proxy (https://, CONNECT)' : 'SOCKS5'}`, async () => {
        const s = session(`node-${client.split(' ')[0]}-${listener}-zz`);
        try {
          const failure = await failureOf(send(s));
          // undici hides a refused CONNECT (the client asks the service); https-proxy-agent passes the proxy's answer on.
          if (listener === 'http') expectHttpRefusal(failure, client.startsWith('fetch') ? 'service' : 'proxy');
          else expectSocksRefusal(failure);
        } finally {
          await s.close();
        }
      });
    }

    it('fetch (undici) × SOCKS5', async () => {
      const s = new ExitpoolSession({ key: 'node-fetch-socks5-zz', token: TEST_PROXY_TOKEN, proxy: `http://127.0.0.1:${suite.svc.httpPort}`, api: `http://127.0.0.1:${suite.svc.apiPort}`, socks: socks(), listener: 'socks5', choices: { countries: ['zz'] } });
      try {
        expectSocksRefusal(await failureOf(s.fetch(suite.svc.whoamiUrl)));
      } finally {
        await s.close();
      }
    });

    it('Crawlee × the HTTP proxy (https://, CONNECT): typed for the failed-request handler, not retried', async () => {
      crawleeLog.setLevel(CrawleeLogLevel.OFF);
      const pool = new ExitpoolCrawlee(ProxyConfiguration, { token: TEST_PROXY_TOKEN, proxy: `http://127.0.0.1:${suite.svc.httpPort}`, api: `http://127.0.0.1:${suite.svc.apiPort}`, choices: { countries: ['zz'] } });
      const failed: unknown[] = [];
      try {
        const stats = await new HttpCrawler(
          { ...pool.crawlerOptions, maxRequestRetries: 3, requestHandler: pool.wrap(() => undefined), errorHandler: pool.errors(), failedRequestHandler: pool.failed((_ctx, error) => void failed.push(error)) },
          new Configuration({ persistStorage: false }),
        ).run([httpsUrl()]);
        expect(stats.requestsFailed).to.equal(1);
      } finally {
        await pool.close();
      }
      expect(failed).to.have.length(1);
      expectHttpRefusal(failed[0], 'service');
    });
  });

  describe('the refusal matrix: Python (Debian python3)', () => {
    const env = (key: string, extra: Record<string, string>): Record<string, string> => ({
      EXITPOOL_API: `http://127.0.0.1:${suite.svc.apiPort}`,
      EXITPOOL_TOKEN: TEST_PROXY_TOKEN,
      EXITPOOL_HTTP: `127.0.0.1:${suite.svc.httpPort}`,
      EXITPOOL_SOCKS: socks(),
      SESSION_KEY: key,
      COUNTRIES: 'zz',
      ...extra,
    });
    for (const client of ['requests', 'httpx', 'httpx-async']) {
      for (const listener of ['http', 'socks5'] as const) {
        it(`${client} × ${listener === 'http' ? 'the HTTP proxy (https://, CONNECT)' : 'SOCKS5'}`, async () => {
          const target = listener === 'http' ? httpsUrl() : suite.svc.whoamiUrl;
          const r = await runPython(['test/support/python/client_scenario.py', 'refusal'], env(`py-${client}-${listener}-zz`, { CLIENT: client, LISTENER: listener, TARGET_URL: target }));
          expect(r.code, r.stderr).to.equal(0);
          const out = JSON.parse(r.stdout) as Record<string, unknown>;
          // Every one of them hides the proxy's answer: the client asked the service.
          if (listener === 'http') expect(out).to.deep.equal({ error: 'ProxyRefusedError', status: 503, reason: 'no_exit_in_country', source: 'service', retryable: false });
          else expect(out).to.deep.equal({ error: 'SocksReplyError', code: 3, reason: 'no_exit_in_country', retryable: false });
        });
      }
    }

    it('Scrapy × the HTTP proxy (https://, CONNECT): the errback gets the typed refusal', async () => {
      const r = await runPython(['-m', 'scrapy', 'runspider', 'test/support/python/scrapy_spider.py', '-o', '-:json', '--nolog'], env('py-scrapy-zz', { TARGET_URL: httpsUrl() }));
      expect(r.code, r.stderr).to.equal(0);
      expect(JSON.parse(r.stdout)).to.deep.equal([{ error: 'ProxyRefusedError', status: 503, reason: 'no_exit_in_country', source: 'service' }]);
    });
  });

  describe('the gateways’ username dialects, on both listeners (curl)', () => {
    const exitsIn = (country: string): string[] => suite.svc.net.exits.filter((e) => e.egressCountry === country).map((e) => e.egressAddress);
    const viewOf = async (key: string): Promise<SessionView> => (await HealApi.signIn(suite.svc)).json<SessionView>(`/api/sessions/${encodeURIComponent(key)}`);

    for (const [dialect, username, key, country, lifetimeSecs] of [
      ['Oxylabs', 'customer-acme-cc-DE-sessid-abc-sesstime-10', 'customer-acme-sessid-abc', 'de', 600],
      ['Decodo', 'user-john-country-us-session-abc-sessionduration-30', 'user-john-session-abc', 'us', 1800],
    ] as const) {
      it(`${dialect}: ${username} is key ${key} in ${country} for ${lifetimeSecs / 60} minutes`, async () => {
        const bySocks = await curlSocks(suite.svc.socksPort, username, TEST_PROXY_TOKEN, suite.svc.whoamiUrl);
        expect(bySocks.code, bySocks.stderr).to.equal(0);
        const byHttp = await curlHttp(suite.svc.httpPort, username, TEST_PROXY_TOKEN, suite.svc.whoamiUrl);
        expect(byHttp.code, byHttp.stderr).to.equal(0);
        expect(exitsIn(country)).to.include(bySocks.stdout.trim());
        expect(byHttp.stdout.trim(), 'one session on both listeners').to.equal(bySocks.stdout.trim());
        const view = await viewOf(key);
        expect(view.params).to.deep.equal({ countries: [country], lifetime_secs: lifetimeSecs, mode: 'sticky' });
        expect(view.exit_country).to.equal(country);
      });
    }

    it('refuses a parameter it cannot honour (city) on both listeners, rather than take it into the key', async () => {
      const username = 'customer-acme-cc-DE-city-berlin';
      const bySocks = await curlSocks(suite.svc.socksPort, username, TEST_PROXY_TOKEN, suite.svc.whoamiUrl);
      expect(bySocks.code, 'curl: the SOCKS5 proxy refused (reply 2)').to.equal(97);
      const byHttp = await curlHttp(suite.svc.httpPort, username, TEST_PROXY_TOKEN, suite.svc.whoamiUrl, ['-i']);
      expect(byHttp.stdout).to.match(/^HTTP\/1\.1 400 /);
      expect(byHttp.stdout).to.match(/^Proxy-Status: exitpool; error=http_request_error; details="session parameters: city is not supported/m);
      const api = await HealApi.signIn(suite.svc);
      const sessions = await api.json<SessionView[]>('/api/sessions');
      expect(sessions.map((s) => s.key).filter((k) => k.startsWith('customer-acme-cc') || k.includes('city')), 'no session made of it').to.deep.equal([]);
    });
  });
});
