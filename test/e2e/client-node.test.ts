/**
 * @exitpool/client (clients/node) against the real service on the private network: a scraper
 * loop that meets a captcha on its exit reports it, is moved, and gets its page through another
 * exit with no code of the user's beyond configuration; a 200 sign-in page with a reCAPTCHA
 * widget fetched without a report; a move without a new exit stopping the loop
 * (NoFreshExitError); redirects (across hosts, to a path that says "challenge", to a vendor's
 * challenge); a country asked for through the client; the proxy's refusal surfaced as a typed
 * error (the whole matrix of clients and listeners: client-refusals.test.ts).
 */
import { expect } from 'chai';
import type { AuditEvent } from '../../shared/api/audit-event.js';
import { Configuration, log as crawleeLog, LogLevel as CrawleeLogLevel, ProxyConfiguration } from '@crawlee/core';
import { HttpCrawler } from '@crawlee/http';
import axios from 'axios';
import got from 'got';
import { ExitpoolSession, NoFreshExitError, ProxyRefusedError, SocksReplyError, StillBlockedError, type RotateAnswer } from '../../clients/node/src/index.js';
import { axiosThrough } from '../../clients/node/src/axios.js';
import { ExitpoolCrawlee } from '../../clients/node/src/crawlee.js';
import { gotThrough, gotThroughHttpProxy } from '../../clients/node/src/got.js';
import { freshWindow, HealApi } from '../support/clients/api-client.js';
import { captchaReportsOf, expectEachTryMovedOrRotated, movingRotationsOf, reportMovesOf, waitRoutableInstances, whileEveryExitServesCaptcha, whileExitServesCaptcha } from '../support/clients/captcha-exit.js';
import { exitIpOf } from '../support/clients/session-fetch.js';
import { TestSite } from '../support/fakes/test-site.js';
import { TEST_PROXY_TOKEN, withService } from '../support/fixtures/service.js';
import { failureOf } from '../support/assertions/failure-of.js';

const ROTATION_GRACE_MS = 1000;

describe('Node client @exitpool/client (real service, private network)', function () {
  this.timeout(120_000);
  const suite = withService({ POOL_SIZE: '3', EXIT_HEADER: '1', CLIENT_REPORT_BUDGET: '1000/1m', ROTATION_GRACE: `${ROTATION_GRACE_MS}ms` });
  const session = (key: string, extra: Partial<ConstructorParameters<typeof ExitpoolSession>[0]> = {}): ExitpoolSession =>
    new ExitpoolSession({ key, token: TEST_PROXY_TOKEN, proxy: `http://127.0.0.1:${suite.svc.httpPort}`, api: `http://127.0.0.1:${suite.svc.apiPort}`, ...extra });
  let site: TestSite;
  before(async () => {
    site = await TestSite.start();
  });
  after(() => site.close());
  /** Every failure report the audit trail holds for session `key`, as (kind, domain). */
  const reportsOf = async (key: string): Promise<[unknown, unknown][]> =>
    (await (await HealApi.signIn(suite.svc)).events(500)).filter((e) => e.session === key && e.type === 'instance' && e.details.kind !== undefined).map((e) => [e.details.kind, e.details.domain]);

  it('fetches a 200 sign-in page with a reCAPTCHA widget without a single report (fetch and axios)', async () => {
    const s = session('signin-page');
    try {
      const page = await s.fetch(site.url('/signin'));
      expect(page.status).to.equal(200);
      expect(await page.text()).to.include('g-recaptcha');
      expect((await axiosThrough(axios, s, { url: site.url('/signin') })).data).to.include('g-recaptcha');
    } finally {
      await s.close();
    }
    expect(await reportsOf('signin-page')).to.deep.equal([]);
  });

  it('redirects: across hosts the host that answered is reported; a path that says "challenge" is no block; a vendor challenge is, for the site that sent there', async () => {
    const s = session('node-redirects', { attempts: 1 });
    try {
      expect(await failureOf(s.fetch(site.url('/cross')))).to.be.instanceOf(StillBlockedError);
      expect((await s.fetch(site.url('/contest'))).status).to.equal(200);
      const challenge = await failureOf(s.fetch(site.url('/to-challenge'), { redirect: 'manual' }));
      expect(challenge, String(challenge)).to.be.instanceOf(StillBlockedError);
      expect((challenge as StillBlockedError).block).to.deep.include({ kind: 'captcha', vendor: 'datadome' });
    } finally {
      await s.close();
    }
    expect(await reportsOf('node-redirects')).to.have.deep.members([
      ['blocked', 'www.shop.testnet'],
      ['captcha', 'shop.testnet'],
    ]);
  });

  it('a move that finds no new exit (the only exit of its country) stops with NoFreshExitError, never retrying on the exit it reported', async () => {
    const se = suite.svc.net.exits.filter((e) => e.egressCountry === 'se').map((e) => e.egressAddress);
    expect(se, 'se has one exit on the test network').to.have.length(1);
    const key = 'node-only-se';
    const s = session(key, { choices: { countries: ['se'] }, attempts: 3 });
    try {
      expect(await (await s.fetch(suite.svc.whoamiUrl)).text()).to.equal(`${se[0]}\n`);
      await freshWindow(await HealApi.signIn(suite.svc), key);
      suite.svc.net.whoami.resetHits();
      const failure = await whileExitServesCaptcha(suite.svc, se[0] as string, ROTATION_GRACE_MS + 200, () => failureOf(s.fetch(suite.svc.whoamiUrl)));
      expect(failure, String(failure)).to.be.instanceOf(NoFreshExitError);
      expect((failure as NoFreshExitError).note).to.not.equal('');
      expect(suite.svc.net.whoami.hits(se[0] as string), 'one try, none after the move').to.equal(1);
    } finally {
      await s.close();
    }
    expect(await reportsOf(key)).to.deep.equal([['captcha', 'whoami.testnet']]);
  });

  for (const [name, send] of [
    ['fetch (undici, the HTTP proxy)', (s: ExitpoolSession) => s.fetch(suite.svc.whoamiUrl).then((r) => r.text())],
    ['got over SOCKS5', (s: ExitpoolSession) => gotThrough(got, s, `127.0.0.1:${suite.svc.socksPort}`, suite.svc.whoamiUrl).then((r) => r.body)],
    ['got over the HTTP proxy', (s: ExitpoolSession) => gotThroughHttpProxy(got, s, suite.svc.whoamiUrl).then((r) => r.body)],
    ['axios over the HTTP proxy', (s: ExitpoolSession) => axiosThrough(axios, s, { url: suite.svc.whoamiUrl }).then((r) => r.data)],
    ['axios over SOCKS5', (s: ExitpoolSession) => axiosThrough(axios, s, { url: suite.svc.whoamiUrl }, `127.0.0.1:${suite.svc.socksPort}`).then((r) => r.data)],
  ] as const) {
    it(`${name}: meets a captcha on its exit, reports it with the site, is moved, and gets the page through another exit`, async () => {
      const key = `node-${name.replace(/\W+/g, '-')}`;
      // The variants before may have left an instance quarantined (or restarting) and another
      // rotating: the report needs one besides the session's to move it to.
      await waitRoutableInstances(await HealApi.signIn(suite.svc), 2);
      const s = session(key);
      try {
        const burnt = await exitIpOf(suite.svc, key);
        const ip = await whileExitServesCaptcha(suite.svc, burnt, ROTATION_GRACE_MS + 200, async () => String(await send(s)).trim());
        expect(ip).to.match(/^127\./);
        expect(ip).to.not.equal(burnt);
        expect(s.exit, 'the client knows its exit').to.equal(ip);
      } finally {
        await s.close();
      }
      const api = await HealApi.signIn(suite.svc);
      const reports = await captchaReportsOf(api, key);
      expect(reports).to.have.length(1);
      expect(reports[0]?.details.domain).to.equal('whoami.testnet');
      // The report itself moved the session (issue 29), or the quarantine or site ban it caused did (an earlier
      // variant's captcha on the same instance is still in the window): the client asked for no rotation.
      const events = (await api.events(300)).filter((e: AuditEvent) => e.session === key);
      expect(reportMovesOf(events, key).moves, JSON.stringify(events)).to.not.deep.equal([]);
      // (A free instance given a fresh exit for the report's move is audited `rotate` with the session too.)
      expect(movingRotationsOf(events, key), `no rotation asked for: ${JSON.stringify(events)}`).to.equal(0);
    });
  }

  it('fetch reads its exit from Exitpool-Exit (EXIT_HEADER) before any rotation', async () => {
    const s = session('header-reader');
    try {
      const ip = (await (await s.fetch(suite.svc.whoamiUrl)).text()).trim();
      expect(s.exit).to.equal(ip);
    } finally {
      await s.close();
    }
  });

  it('Crawlee: an HttpCrawler whose session meets a captcha reports it, is moved, and gets the page through another exit', async () => {
    const key = 'crawlee-fixed';
    const burnt = await exitIpOf(suite.svc, key);
    const pool = new ExitpoolCrawlee(ProxyConfiguration, {
      token: TEST_PROXY_TOKEN,
      proxy: `http://127.0.0.1:${suite.svc.httpPort}`,
      api: `http://127.0.0.1:${suite.svc.apiPort}`,
      // Every Crawlee session on the one exitpool session placed (and burnt) above.
      keyFor: () => key,
    });
    const pages: string[] = [];
    crawleeLog.setLevel(CrawleeLogLevel.OFF);
    try {
      await whileExitServesCaptcha(suite.svc, burnt, ROTATION_GRACE_MS + 200, async () => {
        const crawler = new HttpCrawler(
          {
            ...pool.crawlerOptions,
            additionalMimeTypes: ['text/plain'],
            maxRequestRetries: 3,
            requestHandler: pool.wrap(async ({ body }) => {
              pages.push(String(body).trim());
            }),
          },
          new Configuration({ persistStorage: false }),
        );
        const stats = await crawler.run([suite.svc.whoamiUrl]);
        expect(stats.requestsFinished).to.equal(1);
        expect(stats.requestsFailed).to.equal(0);
      });
    } finally {
      await pool.close();
    }
    expect(pages).to.have.length(1);
    expect(pages[0]).to.match(/^127\./);
    expect(pages[0]).to.not.equal(burnt);
    const reports = await captchaReportsOf(await HealApi.signIn(suite.svc), key);
    expect(reports).to.have.length(1);
    expect(reports[0]?.details.domain).to.equal('whoami.testnet');
  });

  it('asks for a country through got and axios (both ways each) and Crawlee too, and gets SOCKS5 refusals as SocksReplyError and the HTTP proxy’s as ProxyRefusedError', async () => {
    const us = suite.svc.net.exits.filter((e) => e.egressCountry === 'us').map((e) => e.egressAddress);
    const socks = `127.0.0.1:${suite.svc.socksPort}`;
    const make = (key: string, country: string): ExitpoolSession => session(key, { choices: { countries: [country] } });
    const sessions: ExitpoolSession[] = [];
    try {
      const g = make('got-us', 'us');
      const gh = make('got-http-us', 'us');
      const a = make('axios-us', 'us');
      const b = make('axios-socks-us', 'us');
      sessions.push(g, gh, a, b);
      expect(us).to.include((await gotThrough(got, g, socks, suite.svc.whoamiUrl)).body.trim());
      expect(us).to.include((await gotThroughHttpProxy(got, gh, suite.svc.whoamiUrl)).body.trim());
      expect(us).to.include(String((await axiosThrough(axios, a, { url: suite.svc.whoamiUrl })).data).trim());
      expect(us).to.include(String((await axiosThrough(axios, b, { url: suite.svc.whoamiUrl }, socks)).data).trim());
      const pool = new ExitpoolCrawlee(ProxyConfiguration, { token: TEST_PROXY_TOKEN, proxy: `http://127.0.0.1:${suite.svc.httpPort}`, api: `http://127.0.0.1:${suite.svc.apiPort}`, choices: { countries: ['us'] } });
      const pages: string[] = [];
      crawleeLog.setLevel(CrawleeLogLevel.OFF);
      await new HttpCrawler(
        { ...pool.crawlerOptions, additionalMimeTypes: ['text/plain'], requestHandler: pool.wrap(async ({ body }) => void pages.push(String(body).trim())) },
        new Configuration({ persistStorage: false }),
      ).run([suite.svc.whoamiUrl]);
      await pool.close();
      expect(pages).to.have.length(1);
      expect(us).to.include(pages[0]);
      for (const send of [(s: ExitpoolSession) => gotThrough(got, s, socks, suite.svc.whoamiUrl), (s: ExitpoolSession) => axiosThrough(axios, s, { url: suite.svc.whoamiUrl }, socks)]) {
        const zz = make('socks-zz', 'zz');
        sessions.push(zz);
        let refused: unknown;
        await send(zz).catch((e: unknown) => (refused = e));
        expect(refused, String(refused)).to.be.instanceOf(SocksReplyError);
        expect((refused as SocksReplyError).code).to.equal(3);
      }
      const zz = make('http-zz', 'zz');
      sessions.push(zz);
      let refused: unknown;
      await gotThroughHttpProxy(got, zz, suite.svc.whoamiUrl).catch((e: unknown) => (refused = e));
      expect(refused, String(refused)).to.be.instanceOf(ProxyRefusedError);
      expect((refused as ProxyRefusedError).status).to.equal(503);
      expect((refused as ProxyRefusedError).proxyStatus.details).to.match(/^no exit in zz/);
    } finally {
      await Promise.all(sessions.map((s) => s.close()));
    }
  });

  it('asks for a country through the username it builds, and surfaces the proxy’s refusal as a typed error', async () => {
    const us = suite.svc.net.exits.filter((e) => e.egressCountry === 'us').map((e) => e.egressAddress);
    const inUs = session('client-us', { choices: { countries: ['us'] } });
    const nowhere = session('client-zz', { choices: { countries: ['zz'] } });
    try {
      expect(us).to.include((await (await inUs.fetch(suite.svc.whoamiUrl)).text()).trim());
      expect(await inUs.currentExit()).to.be.oneOf(us);
      // The same username works for any client, here curl's SOCKS5.
      expect(us).to.include(await exitIpOf(suite.svc, inUs.username));
      let refused: unknown;
      await nowhere.fetch(suite.svc.whoamiUrl).catch((e: unknown) => (refused = e));
      expect(refused).to.be.instanceOf(ProxyRefusedError);
      expect((refused as ProxyRefusedError).status).to.equal(503);
      expect((refused as ProxyRefusedError).proxyStatus.details).to.match(/^no exit in zz/);
      expect((refused as ProxyRefusedError).retryable).to.equal(false);
    } finally {
      await inUs.close();
      await nowhere.close();
    }
  });

  // Last: it burns every exit's standing with whoami.testnet, which later tests would inherit.
  it('fetch: when every exit is blocked, reports each try once, moves between them, and gives up: StillBlockedError after `attempts`, or NoFreshExitError once the pool runs out of new exits', async () => {
    const key = 'node-all-blocked';
    const attempts = 3;
    class CountingSession extends ExitpoolSession {
      rotations = 0;
      override async rotate(): Promise<RotateAnswer> {
        this.rotations++;
        return super.rotate();
      }
    }
    const s = new CountingSession({ key, token: TEST_PROXY_TOKEN, proxy: `http://127.0.0.1:${suite.svc.httpPort}`, api: `http://127.0.0.1:${suite.svc.apiPort}`, attempts });
    await exitIpOf(suite.svc, key);
    suite.svc.net.whoami.resetHits();
    let failure: unknown;
    try {
      await whileEveryExitServesCaptcha(suite.svc, ROTATION_GRACE_MS + 200, () => s.fetch(suite.svc.whoamiUrl).catch((e: unknown) => (failure = e)));
    } finally {
      await s.close();
    }
    const tries = [...suite.svc.net.whoami.hitsBySource().values()].reduce((a, b) => a + b, 0);
    const api = await HealApi.signIn(suite.svc);
    const reports = await captchaReportsOf(api, key);
    expect(reports, 'one report per blocked try').to.have.length(tries);
    for (const r of reports) expect(r.details.domain).to.equal('whoami.testnet');
    // Each report moves the session itself (issue 29): the report's own move, or the quarantine or
    // site ban it caused (every exit's standing with whoami.testnet is burnt); the client rotates
    // only after a report the pool could not act on.
    const events = await api.events(300);
    const { moves, stays } = reportMovesOf(events, key);
    if (failure instanceof StillBlockedError) {
      expect(failure.attempts).to.equal(attempts);
      expect(failure.block.kind).to.equal('captcha');
      expect((failure.response as { status: number }).status, 'the last page is kept').to.equal(200);
      expect(tries).to.equal(attempts);
      expectEachTryMovedOrRotated(events, key, tries, s.rotations);
    } else {
      expect(failure, String(failure)).to.be.instanceOf(NoFreshExitError);
      expect(tries, 'no try after the move that found no new exit').to.be.within(1, attempts);
      expect(moves.length, 'at most one move per report').to.be.at.most(tries);
      expect(s.rotations, 'a rotation only after a report the pool could not act on').to.be.at.most(stays.length);
    }
  });
});
