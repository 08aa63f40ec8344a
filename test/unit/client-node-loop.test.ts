/**
 * The Node client's request loop against a fake pool (test/support/fakes/fake-exitpool.ts): honest
 * rotations (the report's answer, with and without `moved`; `new_exit: false`), one report per
 * block event, a failed report, the API's credential on redirects, and the proxy's refusals
 * typed whether the library shows them or hides them.
 */
import { expect } from 'chai';
import axios from 'axios';
import got from 'got';
import { Configuration, ProxyConfiguration, log as crawleeLog, LogLevel as CrawleeLogLevel, type Session } from '@crawlee/core';
import { HttpCrawler } from '@crawlee/http';
import { ExitpoolSession, NoFreshExitError, ProxyRefusedError, SocksReplyError, StillBlockedError } from '../../clients/node/src/index.js';
import { axiosThrough } from '../../clients/node/src/axios.js';
import { ExitpoolCrawlee } from '../../clients/node/src/crawlee.js';
import { gotThrough, gotThroughHttpProxy } from '../../clients/node/src/got.js';
import { FakeExitpool, type FakePage } from '../support/fakes/fake-exitpool.js';
import { failureOf } from '../support/assertions/failure-of.js';

const SITE = 'http://site.test';
const FORBIDDEN: FakePage = { status: 403, body: 'Forbidden' };

/** `/blocked` is a 403 on every exit; `/cross` redirects to another host that answers 403; anything else a page. */
function site(url: URL): FakePage {
  if (url.hostname === 'www.site.test') return FORBIDDEN;
  if (url.pathname === '/blocked') return FORBIDDEN;
  if (url.pathname === '/cross') return { status: 302, headers: { Location: 'http://www.site.test/landing' } };
  return { status: 200, body: 'welcome' };
}

describe('Node client: the request loop (fake pool)', function () {
  this.timeout(20_000);
  let fake: FakeExitpool;
  const sessions: ExitpoolSession[] = [];
  beforeEach(async () => {
    fake = await FakeExitpool.start(site);
  });
  afterEach(async () => {
    await Promise.all(sessions.splice(0).map((s) => s.close()));
    await fake.close();
  });
  const session = (key: string, extra: Partial<ConstructorParameters<typeof ExitpoolSession>[0]> = {}): ExitpoolSession => {
    const s = new ExitpoolSession({ key, token: 'tp_test', proxy: fake.url, api: fake.url, attempts: 3, ...extra });
    sessions.push(s);
    return s;
  };

  describe('honest rotations', () => {
    it('a report answered without `moved` (today’s service): rotates itself, then retries through the new exit', async () => {
      const s = session('no-moved');
      const failure = await failureOf(s.fetch(`${SITE}/blocked`));
      expect(failure).to.be.instanceOf(StillBlockedError);
      expect(fake.reports).to.have.length(3);
      expect(fake.rotations, 'a rotation between tries').to.have.length(2);
      expect(fake.carried.map((c) => c.exit)).to.deep.equal(['127.0.0.11', '127.0.0.12', '127.0.0.13']);
    });

    it('`moved: false`: the same as no `moved`, the client rotates', async () => {
      fake.reportAnswer = { moved: false };
      const s = session('moved-false', { attempts: 2 });
      await failureOf(s.fetch(`${SITE}/blocked`));
      expect(fake.rotations).to.have.length(1);
      expect(fake.carried.map((c) => c.exit)).to.deep.equal(['127.0.0.11', '127.0.0.12']);
    });

    it('`moved: true`: the pool already moved the session, the client does not rotate it again', async () => {
      fake.reportAnswer = { moved: true, newExit: true };
      const s = session('moved-true');
      const failure = await failureOf(s.fetch(`${SITE}/blocked`));
      expect(failure).to.be.instanceOf(StillBlockedError);
      expect(fake.rotations, 'never a second move').to.deep.equal([]);
      expect(fake.reports).to.have.length(3);
      expect(new Set(fake.carried.map((c) => c.exit)).size, 'each try through a new exit').to.equal(3);
      expect(s.exit).to.equal(fake.exitIp());
    });

    it('a move on the report without a new exit (`moved: true, new_exit: false`) stops with NoFreshExitError', async () => {
      fake.reportAnswer = { moved: true, newExit: false };
      const s = session('moved-stale');
      const failure = await failureOf(s.fetch(`${SITE}/blocked`));
      expect(failure).to.be.instanceOf(NoFreshExitError);
      expect((failure as NoFreshExitError).note).to.match(/last 5 exits/);
      expect((failure as NoFreshExitError).block.kind).to.equal('blocked');
      expect(fake.carried, 'no try after it').to.have.length(1);
      expect(fake.rotations).to.deep.equal([]);
    });

    it('a rotation without a new exit (`new_exit: false`) stops with NoFreshExitError, never retrying on the exit it reported', async () => {
      fake.freshExits = 1;
      const s = session('rotation-stale', { attempts: 5 });
      const failure = await failureOf(s.fetch(`${SITE}/blocked`));
      expect(failure).to.be.instanceOf(NoFreshExitError);
      expect((failure as NoFreshExitError).exitIp).to.equal('127.0.0.12');
      expect(fake.carried.map((c) => c.exit), 'one new exit, then the stop').to.deep.equal(['127.0.0.11', '127.0.0.12']);
      expect(fake.rotations).to.have.length(2);
      expect(fake.reports).to.have.length(2);
    });

    it('parallel requests blocked on one exit file one report and one rotation, and all retry on the new exit', async () => {
      let blockedOnFirstExit = true;
      await fake.close();
      fake = await FakeExitpool.start((url) => (url.pathname === '/p' && blockedOnFirstExit ? FORBIDDEN : { status: 200, body: 'welcome' }));
      const s = session('parallel');
      const origRotate = s.rotate.bind(s);
      s.rotate = async () => {
        blockedOnFirstExit = false;
        return origRotate();
      };
      const pages = await Promise.all(Array.from({ length: 6 }, () => s.fetch(`${SITE}/p`).then((r) => r.text())));
      expect(pages).to.deep.equal(Array(6).fill('welcome'));
      expect(fake.reports, 'one report for one block event').to.have.length(1);
      expect(fake.rotations).to.have.length(1);
    });

    it('a block met later on the same exit, after a report that moved nothing, is an event of its own: reported again', async () => {
      const s = session('one-try', { attempts: 1 });
      for (let i = 0; i < 2; i++) expect(await failureOf(s.fetch(`${SITE}/blocked`))).to.be.instanceOf(StillBlockedError);
      expect(fake.reports).to.have.length(2);
      expect(fake.rotations).to.deep.equal([]);
    });

    it('a report that fails does not stop the loop: the session still moves and the request goes on', async () => {
      fake.reportStatus = 500;
      const failed: unknown[] = [];
      const s = session('report-fails', { attempts: 2, onReportFailed: (e) => failed.push(e) });
      const failure = await failureOf(s.fetch(`${SITE}/blocked`));
      expect(failure).to.be.instanceOf(StillBlockedError);
      expect(failed).to.have.length(2);
      expect(fake.rotations).to.have.length(1);
    });
  });

  describe('safety', () => {
    it('reports the host that answered after a cross-host redirect', async () => {
      const s = session('cross', { attempts: 1 });
      await failureOf(s.fetch(`${SITE}/cross`));
      expect(fake.reports.map((r) => r.domain)).to.deep.equal(['www.site.test']);
    });

    it('never sends the token to another origin the API redirects to', async () => {
      const other = await FakeExitpool.start(site);
      try {
        fake.apiRedirectTo = other.url;
        const s = session('redirected-api');
        expect(await s.currentExit(), 'answered by the other origin').to.equal(other.exitIp());
        expect(fake.apiAuthorizations.at(-1)?.authorization).to.equal('Bearer tp_test');
        expect(other.apiAuthorizations.length, 'the redirect was followed').to.be.greaterThan(0);
        for (const seen of other.apiAuthorizations) expect(seen.authorization, seen.path).to.equal(undefined);
      } finally {
        await other.close();
      }
    });
  });

  describe('refusals of https:// over the HTTP proxy (a refused CONNECT)', () => {
    const PROXY_STATUS = 'exitpool; error=destination_unavailable; details="no exit in zz: none in the exit catalog"';
    beforeEach(() => {
      fake.connectRefusal = { status: 503, proxyStatus: PROXY_STATUS, body: 'no exit in zz: none in the exit catalog' };
    });

    it('fetch (undici hides the reply): asks the service once and throws ProxyRefusedError with its reason', async () => {
      const s = session('fetch-zz', { choices: { countries: ['zz'] } });
      const failure = await failureOf(s.fetch('https://site.test/'));
      expect(failure, String(failure)).to.be.instanceOf(ProxyRefusedError);
      const refused = failure as ProxyRefusedError;
      expect([refused.status, refused.proxyStatus.error, refused.reason, refused.source, refused.retryable]).to.deep.equal([503, 'destination_unavailable', 'no_exit_in_country', 'service', false]);
      expect(fake.apiAuthorizations.filter((a) => a.path.endsWith('/refusal'))).to.have.length(1);
    });

    it('fetch: a refusal older than the request is not this request’s: the library’s own error stands', async () => {
      const s = session('fetch-stale', { choices: { countries: ['zz'] } });
      fake.connectRefusal = null;
      fake.refusal = { key: 'fetch-stale', reason: 'no_exit_in_country', detail: 'old', at: Date.now() - 10_000, httpStatus: 503, proxyStatusError: 'destination_unavailable', socksReply: 3 };
      // The CONNECT is accepted and the tunnel closed at once: fetch fails on its own.
      const failure = await failureOf(s.fetch('https://site.test/'));
      expect(failure).to.not.be.instanceOf(ProxyRefusedError);
    });

    it('got and axios (https-proxy-agent passes the proxy’s answer on): ProxyRefusedError read from Proxy-Status', async () => {
      for (const [name, send] of [
        ['got', (s: ExitpoolSession) => gotThroughHttpProxy(got, s, 'https://site.test/')],
        ['axios', (s: ExitpoolSession) => axiosThrough(axios, s, { url: 'https://site.test/' })],
      ] as const) {
        const failure = await failureOf(send(session(`${name}-zz`, { choices: { countries: ['zz'] } })));
        expect(failure, `${name}: ${String(failure)}`).to.be.instanceOf(ProxyRefusedError);
        expect([(failure as ProxyRefusedError).status, (failure as ProxyRefusedError).source, (failure as ProxyRefusedError).retryable], name).to.deep.equal([503, 'proxy', false]);
      }
    });
  });

  describe('refusals over SOCKS5', () => {
    it('fetch (undici names the reply code), got and axios (socks-proxy-agent hides it): SocksReplyError with the service’s reason', async () => {
      const socks = await fake.refuseSocks(3);
      for (const [name, send] of [
        ['fetch', (s: ExitpoolSession) => s.fetch('http://site.test/')],
        ['got', (s: ExitpoolSession) => gotThrough(got, s, socks, 'http://site.test/')],
        ['axios', (s: ExitpoolSession) => axiosThrough(axios, s, { url: 'http://site.test/' }, socks)],
      ] as const) {
        const s = session(`${name}-socks-zz`, { choices: { countries: ['zz'] }, socks, listener: 'socks5' });
        const failure = await failureOf(send(s));
        expect(failure, `${name}: ${String(failure)}`).to.be.instanceOf(SocksReplyError);
        expect([(failure as SocksReplyError).code, (failure as SocksReplyError).reason, (failure as SocksReplyError).retryable], name).to.deep.equal([3, 'no_exit_in_country', false]);
      }
    });
  });

  describe('Crawlee', () => {
    it('releases a session’s exitpool session (and its connections) when Crawlee retires the session', async () => {
      crawleeLog.setLevel(CrawleeLogLevel.OFF);
      const pool = new ExitpoolCrawlee(ProxyConfiguration, { token: 'tp_test', proxy: fake.url, api: fake.url });
      const crawler = new HttpCrawler(
        {
          ...pool.crawlerOptions,
          sessionPoolOptions: { ...pool.crawlerOptions.sessionPoolOptions, maxPoolSize: 1 },
          additionalMimeTypes: ['text/plain'],
          maxConcurrency: 1,
          requestHandler: pool.wrap(async (ctx) => {
            // Retire each session after its page: Crawlee makes a new one for the next.
            (ctx.session as Session | undefined)?.retire();
          }),
        },
        new Configuration({ persistStorage: false }),
      );
      try {
        await crawler.run([`${SITE}/a`, `${SITE}/b`, `${SITE}/c`]);
        expect(fake.carried).to.have.length(3);
        expect(new Set(fake.carried.map((c) => c.username)).size, 'retired sessions were replaced').to.be.at.least(2);
        expect(pool.openSessions, 'every retired session released').to.equal(0);
      } finally {
        await pool.close();
      }
    });

    it('types a refused CONNECT for the failed-request handler and does not retry what waiting cannot help', async () => {
      fake.connectRefusal = { status: 503, proxyStatus: 'exitpool; error=destination_unavailable; details="no exit in zz"', body: 'no exit in zz' };
      crawleeLog.setLevel(CrawleeLogLevel.OFF);
      const pool = new ExitpoolCrawlee(ProxyConfiguration, { token: 'tp_test', proxy: fake.url, api: fake.url, choices: { countries: ['zz'] }, keyFor: () => 'crawlee-zz' });
      const failed: unknown[] = [];
      const crawler = new HttpCrawler(
        { ...pool.crawlerOptions, maxRequestRetries: 3, requestHandler: pool.wrap(() => undefined), errorHandler: pool.errors(), failedRequestHandler: pool.failed((_ctx, error) => void failed.push(error)) },
        new Configuration({ persistStorage: false }),
      );
      try {
        const stats = await crawler.run(['https://site.test/']);
        expect(stats.requestsFailed).to.equal(1);
      } finally {
        await pool.close();
      }
      expect(failed).to.have.length(1);
      expect(failed[0], String(failed[0])).to.be.instanceOf(ProxyRefusedError);
      expect((failed[0] as ProxyRefusedError).reason).to.equal('no_exit_in_country');
    });
  });
});
