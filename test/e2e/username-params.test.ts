/**
 * Session parameters in the proxy username, end to end on the private network (whose GeoIP file
 * puts its 8 exits in 7 countries, two of them in us): placement by country across
 * rotations and a quarantine, an exit assigned on demand for a country no instance serves, clear
 * refusals on both listeners, a lifetime of the session's own, and a new exit per connection.
 */
import { expect } from 'chai';
import type { ExitsView, SessionRotateResult, SessionView } from '../../shared/api/views.js';
import { COUNTRY_EXIT_WAIT_MS } from '../../shared/config/limits.js';
import { HealApi } from '../support/clients/api-client.js';
import { whileExitServesCaptcha } from '../support/clients/captcha-exit.js';
import { curlHttp, curlSocks } from '../support/clients/curl.js';
import { exitIpOf, fetchThroughSession } from '../support/clients/session-fetch.js';
import { TEST_PROXY_TOKEN, withService } from '../support/fixtures/service.js';
import { pollUntil } from '../support/waiting.js';

const ROTATION_GRACE_MS = 1000;

describe('session parameters in the proxy username (real service, private network)', function () {
  this.timeout(240_000);
  const suite = withService({ POOL_SIZE: '3', CLIENT_REPORT_BUDGET: '1000/1m', ROTATION_GRACE: `${ROTATION_GRACE_MS}ms`, FAILURE_WINDOW: '60s' });
  let api: HealApi;
  before(async () => {
    api = await HealApi.signIn(suite.svc);
  });
  const exitsIn = (country: string): string[] => suite.svc.net.exits.filter((e) => e.country === country).map((e) => e.address);
  const rotate = (key: string): Promise<SessionRotateResult> => api.json<SessionRotateResult>(`/api/sessions/${encodeURIComponent(key)}/rotate`, { method: 'POST' });

  it('leaves through an exit of the country asked for, every time, across rotations and a quarantine', async () => {
    expect(exitsIn('us')).to.have.length(2);
    for (const country of ['us', 'de', 'se']) {
      const username = `geo-${country}-country-${country}`;
      for (let i = 0; i < 3; i++) expect(exitsIn(country), `${username} request ${i}`).to.include(await exitIpOf(suite.svc, username));
      const view = await api.session(`geo-${country}`);
      expect(view.params).to.deep.equal({ countries: [country], lifetime_secs: null, mode: 'sticky' });
      expect(view.exit_country).to.equal(country);
    }
    // us has two exits: a rotation moves to the other one, and stays in us.
    const before = await exitIpOf(suite.svc, 'geo-us-country-us');
    const rotated = await rotate('geo-us');
    expect(rotated.new_exit, rotated.exit_note).to.equal(true);
    const after = await exitIpOf(suite.svc, 'geo-us-country-us');
    expect(exitsIn('us')).to.include(after);
    expect(after).to.not.equal(before);
    // Burn that exit: the quarantine moves the session to the other us exit, never out of us.
    await whileExitServesCaptcha(suite.svc, after, ROTATION_GRACE_MS + 500, async () => {
      for (let i = 0; i < 2; i++) {
        expect((await fetchThroughSession(suite.svc, 'geo-us-country-us')).kind).to.equal('captcha');
        await api.reportFailure('geo-us', { kind: 'captcha' });
      }
      const moved = await pollUntil('served in us again', () => fetchThroughSession(suite.svc, 'geo-us-country-us'), 60_000, {
        until: (f) => f.kind === 'ip' && f.ip !== after,
      });
      expect(moved.kind === 'ip' && exitsIn('us').includes(moved.ip), JSON.stringify(moved)).to.equal(true);
    });
    // The same grammar on the HTTP proxy.
    const http = await curlHttp(suite.svc.httpPort, 'web-de-country-de', TEST_PROXY_TOKEN, suite.svc.whoamiUrl);
    expect(http.code, http.stderr).to.equal(0);
    expect(exitsIn('de')).to.include(http.stdout.trim());
    const metrics = (await api.metricsText()).text;
    expect(metrics).to.match(/^pool_sessions_by_country\{country="us"\} 1$/m);
  });

  it('gives an instance an exit in a country none serves, within the bound, for the first request', async () => {
    const assigned = new Set((await api.instances()).map((i) => i.assigned_exit?.country));
    const unserved = [...new Set(suite.svc.net.exits.map((e) => e.country))].find((c) => !assigned.has(c)) as string;
    expect(unserved, 'a country no instance is in').to.be.a('string');
    const started = Date.now();
    const ip = await exitIpOf(suite.svc, `far-${unserved}-country-${unserved}`);
    expect(Date.now() - started).to.be.below(COUNTRY_EXIT_WAIT_MS + 5_000);
    expect(exitsIn(unserved)).to.include(ip);
    const supply = (await api.json<ExitsView>('/api/exits')).countries.find((c) => c.country === unserved);
    expect(supply).to.deep.include({ exits: exitsIn(unserved).length, in_use: 1 });
  });

  it('refuses a country with no exit, and malformed parameters, clearly on both listeners', async () => {
    const socks = await curlSocks(suite.svc.socksPort, 'nowhere-country-fr', TEST_PROXY_TOKEN, suite.svc.whoamiUrl);
    expect(socks.code, 'curl: the SOCKS5 connect failed').to.equal(97);
    expect(socks.stderr).to.match(/network unreachable|\(3\)/i);
    const http = await curlHttp(suite.svc.httpPort, 'nowhere-country-fr', TEST_PROXY_TOKEN, suite.svc.whoamiUrl, ['-i']);
    expect(http.stdout).to.match(/^HTTP\/1\.1 503 /);
    expect(http.stdout).to.match(/^Proxy-Status: exitpool; error=destination_unavailable; details="no exit in fr[^"]*"/m);
    const bad = await curlHttp(suite.svc.httpPort, 'k-country-france', TEST_PROXY_TOKEN, suite.svc.whoamiUrl, ['-i']);
    expect(bad.stdout).to.match(/^HTTP\/1\.1 400 /);
    expect(bad.stdout).to.match(/^Proxy-Status: exitpool; error=http_request_error; details="session parameters: country: .*two-letter ISO 3166 code"\r$/m);
    const badSocks = await curlSocks(suite.svc.socksPort, 'k-mode-fast', TEST_PROXY_TOKEN, suite.svc.whoamiUrl);
    expect(badSocks.code).to.equal(97);
    expect(badSocks.stderr).to.match(/not allowed|\(2\)/i);
    expect(suite.svc.output()).to.match(/proxy usernames refused for their session parameters/);
    expect((await api.metricsText()).text).to.match(/^pool_country_refusals_total\{country="fr",reason="no_exit_in_country"\} 2$/m);
    expect((await api.raw('/api/sessions/nowhere')).status, 'no session is made for a refused request').to.equal(404);
  });

  it('expires a session at its own lifetime while others stay', async () => {
    await exitIpOf(suite.svc, 'brief-ttl-3s');
    await exitIpOf(suite.svc, 'lasting');
    expect((await api.session('brief')).params.lifetime_secs).to.equal(3);
    await pollUntil('the brief session expired', () => api.raw('/api/sessions/brief').then((r) => r.status), 15_000, { until: (s) => s === 404 });
    expect((await api.session('lasting')).key).to.equal('lasting');
  });

  it('gives consecutive connections of a rotating session different exits, counted and healed as one session', async () => {
    const ips: string[] = [];
    for (let i = 0; i < 5; i++) ips.push(await exitIpOf(suite.svc, 'each-mode-rotating'));
    for (let i = 1; i < ips.length; i++) expect(ips[i], `connection ${i}: ${ips.join(' ')}`).to.not.equal(ips[i - 1]);
    const view: SessionView = await pollUntil('counted', () => api.session('each'), 5_000, { until: (v: SessionView) => v.requests === 5 });
    expect(view.params.mode).to.equal('rotating');
  });
});
