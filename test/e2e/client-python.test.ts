/**
 * The Python client (clients/python) against the real service on the private network, with
 * Debian's requests, httpx and Scrapy: for each client a scraper meets a captcha on its exit,
 * the client reports it and rotates, and the page comes through another exit with no code of the
 * user's beyond configuration; a country through the client; refusals as typed errors.
 */
import { expect } from 'chai';
import { CAPTCHA_MARKER } from '../../internal/testnet/index.js';
import type { AuditEvent } from '../../shared/api/audit-event.js';
import { HealApi } from '../support/clients/api-client.js';
import { captchaReportsOf, whileEveryExitServesCaptcha, whileExitServesCaptcha } from '../support/clients/captcha-exit.js';
import { runPython } from '../support/clients/python.js';
import { exitIpOf } from '../support/clients/session-fetch.js';
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
    const burnt = await exitIpOf(suite.svc, key);
    await whileExitServesCaptcha(suite.svc, burnt, ROTATION_GRACE_MS + 200, run);
    return burnt;
  }

  const reportsOf = (key: string): Promise<AuditEvent[]> => captchaReportsOf(api, key);

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
    const us = suite.svc.net.exits.filter((e) => e.country === 'us').map((e) => e.address);
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
  it('requests: when every exit is blocked, reports each try, rotates between them, and raises StillBlockedError after the bound', async () => {
    const key = 'py-all-blocked';
    await exitIpOf(suite.svc, key);
    const r = await whileEveryExitServesCaptcha(suite.svc, ROTATION_GRACE_MS + 200, () => runPython(['test/support/python/client_scenario.py', 'requests-blocked'], env(key, { ATTEMPTS: '3' })));
    expect(r.code, r.stderr).to.equal(0);
    expect(JSON.parse(r.stdout)).to.deep.equal({ error: 'StillBlockedError', attempts: 3, kind: 'captcha', status: 200, rotations: 2 });
    const reports = await reportsOf(key);
    expect(reports, 'one report per blocked try').to.have.length(3);
    for (const report of reports) expect(report.details.domain).to.equal('whoami.testnet');
  });

  it('Scrapy: when every exit is blocked, gives up after EXITPOOL_ATTEMPTS and hands the spider the page marked as still blocked', async () => {
    const key = 'py-scrapy-all-blocked';
    await exitIpOf(suite.svc, key);
    const r = await whileEveryExitServesCaptcha(suite.svc, ROTATION_GRACE_MS + 200, () =>
      runPython(['-m', 'scrapy', 'runspider', 'test/support/python/scrapy_spider.py', '-o', '-:json', '--nolog'], env(key, { ATTEMPTS: '2' })),
    );
    expect(r.code, r.stderr).to.equal(0);
    const items = JSON.parse(r.stdout) as { status: number; body: string; attempt: number; blocked: string | null }[];
    expect(items).to.have.length(1);
    expect(items[0]?.attempt, 'no try past the bound').to.equal(2);
    expect(items[0]?.blocked).to.equal('captcha');
    expect(items[0]?.body).to.include(CAPTCHA_MARKER);
    expect(await reportsOf(key), 'one report per blocked try').to.have.length(2);
    const rotations = (await api.events(200)).filter((e) => e.type === 'rotate' && e.session === key);
    expect(rotations, 'a rotation between the tries, none after the last').to.have.length(1);
  });
});
