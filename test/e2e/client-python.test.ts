/**
 * The Python client (clients/python) against the real service on the private network, with
 * Debian's requests, httpx and Scrapy: for each client a scraper meets a captcha on its exit,
 * the client reports it and rotates, and the page comes through another exit with no code of the
 * user's beyond configuration; a 200 sign-in page with a reCAPTCHA widget fetched without a
 * report; a move without a new exit (NoFreshExitError); redirects; a country through the client;
 * refusals as typed errors (the whole matrix of clients and listeners: client-refusals.test.ts).
 */
import { expect } from 'chai';
import { CAPTCHA_MARKER } from '../../internal/testnet/index.js';
import type { AuditEvent } from '../../shared/api/audit-event.js';
import { freshWindow, HealApi } from '../support/clients/api-client.js';
import { captchaReportsOf, expectEachTryMovedOrRotated, movingRotationsOf, reportMovesOf, waitRoutableInstances, whileEveryExitServesCaptcha, whileExitServesCaptcha } from '../support/clients/captcha-exit.js';
import { runPython } from '../support/clients/python.js';
import { exitIpOf } from '../support/clients/session-fetch.js';
import { TestSite } from '../support/fakes/test-site.js';
import { TEST_PROXY_TOKEN, withService } from '../support/fixtures/service.js';

const ROTATION_GRACE_MS = 1000;

describe('Python client exitpool_client (real service, private network, Debian python3)', function () {
  this.timeout(180_000);
  const suite = withService({ POOL_SIZE: '3', EXIT_HEADER: '1', CLIENT_REPORT_BUDGET: '1000/1m', ROTATION_GRACE: `${ROTATION_GRACE_MS}ms` });
  let api: HealApi;
  before(async () => {
    api = await HealApi.signIn(suite.svc);
  });
  const env = (key: string, extra: Record<string, string> = {}): Record<string, string> => ({
    EXITPOOL_API: `http://127.0.0.1:${suite.svc.apiPort}`,
    EXITPOOL_TOKEN: TEST_PROXY_TOKEN,
    EXITPOOL_HTTP: `127.0.0.1:${suite.svc.httpPort}`,
    EXITPOOL_SOCKS: `127.0.0.1:${suite.svc.socksPort}`,
    TARGET_URL: suite.svc.whoamiUrl,
    SESSION_KEY: key,
    ...extra,
  });

  /** Burns the exit `key` leaves through (whoami serves it a captcha) while `run` goes; returns the burnt IP. */
  async function withBurntExit(key: string, run: () => Promise<void>): Promise<string> {
    // The tests before may have left an instance quarantined (or restarting) and another
    // rotating: the report needs one besides the session's to move it to.
    await waitRoutableInstances(api, 2);
    const burnt = await exitIpOf(suite.svc, key);
    await whileExitServesCaptcha(suite.svc, burnt, ROTATION_GRACE_MS + 200, run);
    return burnt;
  }

  const reportsOf = (key: string): Promise<AuditEvent[]> => captchaReportsOf(api, key);
  /** Every failure report of session `key`, as (kind, domain). */
  const anyReportsOf = async (key: string): Promise<[unknown, unknown][]> =>
    (await api.events(500)).filter((e) => e.session === key && e.type === 'instance' && e.details.kind !== undefined).map((e) => [e.details.kind, e.details.domain]);
  let site: TestSite;
  before(async () => {
    site = await TestSite.start();
  });
  after(() => site.close());

  it('requests and httpx fetch a 200 sign-in page with a reCAPTCHA widget without a single report', async () => {
    const r = await runPython(['test/support/python/client_scenario.py', 'signin'], env('py-signin', { SITE_URL: site.url('') }));
    expect(r.code, r.stderr).to.equal(0);
    expect(JSON.parse(r.stdout)).to.deep.equal({ status: [200, 200], widget: [true, true] });
    expect(await anyReportsOf('py-signin')).to.deep.equal([]);
  });

  it('requests: across hosts the host that answered is reported; a path that says "challenge" is no block; a vendor challenge is, for the site that sent there', async () => {
    const r = await runPython(['test/support/python/client_scenario.py', 'redirects'], env('py-redirects', { SITE_URL: site.url(''), ATTEMPTS: '1' }));
    expect(r.code, r.stderr).to.equal(0);
    expect(JSON.parse(r.stdout)).to.deep.equal({ cross: 'blocked', contest: 200, 'to-challenge': ['captcha', 'datadome'] });
    expect(await anyReportsOf('py-redirects')).to.have.deep.members([
      ['blocked', 'www.shop.testnet'],
      ['captcha', 'shop.testnet'],
    ]);
  });

  it('requests: a move that finds no new exit (the only exit of its country) stops with NoFreshExitError, never retrying on the exit it reported', async () => {
    const se = suite.svc.net.exits.filter((e) => e.egressCountry === 'ca').map((e) => e.egressAddress);
    expect(se, 'ca has one exit on the test network').to.have.length(1);
    const key = 'py-only-ca';
    expect(await exitIpOf(suite.svc, `${key}-country-ca`)).to.equal(se[0]);
    await freshWindow(api, key);
    suite.svc.net.whoami.resetHits();
    const r = await whileExitServesCaptcha(suite.svc, se[0] as string, ROTATION_GRACE_MS + 200, () =>
      runPython(['test/support/python/client_scenario.py', 'no-fresh-exit'], env(key, { COUNTRIES: 'ca', ATTEMPTS: '3' })),
    );
    expect(r.code, r.stderr).to.equal(0);
    const out = JSON.parse(r.stdout) as { error: string; note: string; kind: string };
    expect(out.error).to.equal('NoFreshExitError');
    expect(out.kind).to.equal('captcha');
    expect(out.note).to.not.equal('');
    expect(suite.svc.net.whoami.hits(se[0] as string), 'one try, none after the move').to.equal(1);
    expect(await anyReportsOf(key)).to.deep.equal([['captcha', 'whoami.testnet']]);
  });

  for (const scenario of ['requests', 'requests-socks', 'httpx', 'httpx-async'] as const) {
    it(`${scenario}: meets a captcha, reports it with the site, is moved, and gets the page through another exit`, async () => {
      const key = `py-${scenario}`;
      let out = { status: 0, body: '', exit: '' };
      const burnt = await withBurntExit(key, async () => {
        const r = await runPython(['test/support/python/client_scenario.py', scenario], env(key));
        expect(r.code, r.stderr).to.equal(0);
        out = JSON.parse(r.stdout) as typeof out;
      });
      expect(out.status).to.equal(200);
      expect(out.body).to.match(/^127\.\d+\.\d+\.\d+$/);
      expect(out.body).to.not.equal(burnt);
      expect(out.exit, 'the client knows its exit').to.equal(out.body);
      const reports = await reportsOf(key);
      expect(reports).to.have.length(1);
      expect(reports[0]?.details.domain).to.equal('whoami.testnet');
    });
  }

  it('Scrapy: a real crawl through the downloader middleware retries a captcha page on a new exit', async () => {
    const key = 'py-scrapy';
    let items: { status: number; body: string; exit: string; attempt: number }[] = [];
    const burnt = await withBurntExit(key, async () => {
      const r = await runPython(['-m', 'scrapy', 'runspider', 'test/support/python/scrapy_spider.py', '-o', '-:json', '--nolog'], env(key));
      expect(r.code, r.stderr).to.equal(0);
      items = JSON.parse(r.stdout) as typeof items;
    });
    expect(items).to.have.length(1);
    expect(items[0]?.status).to.equal(200);
    expect(items[0]?.body).to.not.equal(burnt);
    expect(items[0]?.attempt, 'retried once').to.equal(2);
    expect(await reportsOf(key)).to.have.length(1);
  });

  it('asks for a country through each client (requests both ways, httpx sync and async, Scrapy), and surfaces refusals as typed errors on both listeners', async () => {
    const us = suite.svc.net.exits.filter((e) => e.egressCountry === 'us').map((e) => e.egressAddress);
    for (const scenario of ['requests', 'requests-socks', 'httpx', 'httpx-async']) {
      const inUs = await runPython(['test/support/python/client_scenario.py', scenario], env(`py-us-${scenario}`, { COUNTRIES: 'us' }));
      expect(inUs.code, inUs.stderr).to.equal(0);
      expect(us, scenario).to.include((JSON.parse(inUs.stdout) as { body: string }).body);
    }
    const crawl = await runPython(['-m', 'scrapy', 'runspider', 'test/support/python/scrapy_spider.py', '-o', '-:json', '--nolog'], env('py-us-scrapy', { COUNTRIES: 'us' }));
    expect(crawl.code, crawl.stderr).to.equal(0);
    expect(us).to.include((JSON.parse(crawl.stdout) as { body: string }[])[0]?.body);
    const refused = await runPython(['test/support/python/client_scenario.py', 'refused'], env('py-zz', { COUNTRIES: 'zz' }));
    expect(refused.code, refused.stderr).to.equal(0);
    const out = JSON.parse(refused.stdout) as { http: { status: number; details: string; retryable: boolean }; socks: { code: number } };
    expect(out.http.status).to.equal(503);
    expect(out.http.details).to.match(/^no exit in zz/);
    expect(out.http.retryable).to.equal(false);
    expect(out.socks.code).to.equal(3);
  });

  // Last: they burn every exit's standing with whoami.testnet, which later tests would inherit.
  it('requests: when every exit is blocked, reports each try once, moves between them, and gives up: StillBlockedError after the bound, or NoFreshExitError once the pool runs out of new exits', async () => {
    const key = 'py-all-blocked';
    await exitIpOf(suite.svc, key);
    suite.svc.net.whoami.resetHits();
    const r = await whileEveryExitServesCaptcha(suite.svc, ROTATION_GRACE_MS + 200, () => runPython(['test/support/python/client_scenario.py', 'requests-blocked'], env(key, { ATTEMPTS: '3' })));
    expect(r.code, r.stderr).to.equal(0);
    const out = JSON.parse(r.stdout) as { error: string; rotations: number; kind: string };
    const tries = [...suite.svc.net.whoami.hitsBySource().values()].reduce((a, b) => a + b, 0);
    const reports = await reportsOf(key);
    expect(reports, 'one report per blocked try').to.have.length(tries);
    for (const report of reports) expect(report.details.domain).to.equal('whoami.testnet');
    // Each report moves the session itself (issue 29): the client rotates only after a report the pool could not act on.
    const events = await api.events(300);
    const { moves, stays } = reportMovesOf(events, key);
    if (out.error === 'StillBlockedError') {
      expect(out).to.deep.include({ error: 'StillBlockedError', attempts: 3, kind: 'captcha', status: 200 });
      expect(tries).to.equal(3);
      expectEachTryMovedOrRotated(events, key, tries, out.rotations);
    } else {
      expect(out).to.deep.include({ error: 'NoFreshExitError', kind: 'captcha' });
      expect(tries, 'no try after the move that found no new exit').to.be.within(1, 3);
      expect(moves.length, 'at most one move per report').to.be.at.most(tries);
      expect(out.rotations, 'a rotation only after a report the pool could not act on').to.be.at.most(stays.length);
    }
  });

  it('Scrapy: when every exit is blocked, gives up after EXITPOOL_ATTEMPTS and hands the spider the page marked as still blocked (or the errback NoFreshExitError)', async () => {
    const key = 'py-scrapy-all-blocked';
    await exitIpOf(suite.svc, key);
    suite.svc.net.whoami.resetHits();
    const r = await whileEveryExitServesCaptcha(suite.svc, ROTATION_GRACE_MS + 200, () =>
      runPython(['-m', 'scrapy', 'runspider', 'test/support/python/scrapy_spider.py', '-o', '-:json', '--nolog'], env(key, { ATTEMPTS: '2' })),
    );
    expect(r.code, r.stderr).to.equal(0);
    const items = JSON.parse(r.stdout) as { status?: number; body?: string; attempt?: number; blocked?: string | null; error?: string }[];
    expect(items).to.have.length(1);
    const tries = [...suite.svc.net.whoami.hitsBySource().values()].reduce((a, b) => a + b, 0);
    expect(await reportsOf(key), 'one report per blocked try').to.have.length(tries);
    // Each report moves the session itself (issue 29); the middleware rotates only after a report the pool could not act on.
    const events = await api.events(300);
    const { moves, stays } = reportMovesOf(events, key);
    if (items[0]?.error === undefined) {
      expect(items[0]?.attempt, 'no try past the bound').to.equal(2);
      expect(items[0]?.blocked).to.equal('captcha');
      expect(items[0]?.body).to.include(CAPTCHA_MARKER);
      expectEachTryMovedOrRotated(events, key, tries);
    } else {
      expect(items[0]?.error).to.equal('NoFreshExitError');
      expect(tries).to.be.within(1, 2);
      expect(moves.length).to.be.at.most(tries);
      expect(movingRotationsOf(events, key), 'a rotation only after a report the pool could not act on').to.be.at.most(stays.length);
    }
  });
});
