/**
 * Session parameters in the proxy username, end to end on the private network (whose GeoIP file
 * puts its 8 exits in 7 countries, two of them in us): placement by country across
 * rotations and a quarantine, an exit assigned on demand for a country no instance serves, clear
 * refusals on both listeners, a lifetime of the session's own, and a new exit per connection.
 */
import { expect } from 'chai';
import { setTimeout as sleep } from 'node:timers/promises';
import type { AuditEvent } from '../../shared/api/audit-event.js';
import type { ExitsView, SessionRotateResult, SessionView } from '../../shared/api/views.js';
import { COUNTRY_EXIT_WAIT_MS } from '../../shared/config/limits.js';
import { HealApi } from '../support/clients/api-client.js';
import { whileExitServesCaptcha } from '../support/clients/captcha-exit.js';
import { curl, curlHttp, curlSocks } from '../support/clients/curl.js';
import { exitIpOf, fetchThroughSession } from '../support/clients/session-fetch.js';
import { TEST_PROXY_TOKEN, withService } from '../support/fixtures/service.js';
import { pollUntil } from '../support/waiting.js';

const ROTATION_GRACE_MS = 1000;
const TOKEN_IN_URL = encodeURIComponent(TEST_PROXY_TOKEN);

describe('session parameters in the proxy username (real service, private network)', function () {
  this.timeout(240_000);
  const suite = withService({ POOL_SIZE: '3', CLIENT_REPORT_BUDGET: '1000/1m', ROTATION_GRACE: `${ROTATION_GRACE_MS}ms`, FAILURE_WINDOW: '60s' });
  let api: HealApi;
  before(async () => {
    api = await HealApi.signIn(suite.svc);
  });
  const exitsIn = (country: string): string[] => suite.svc.net.exits.filter((e) => e.egressCountry === country).map((e) => e.egressAddress);
  const rotate = (key: string): Promise<SessionRotateResult> => api.json<SessionRotateResult>(`/api/sessions/${encodeURIComponent(key)}/rotate`, { method: 'POST' });

  it('leaves through an exit of the country asked for, every time, across rotations and a quarantine', async () => {
    // us has four exits by the address sites see: two of its own, two that leave from its /24s.
    expect(exitsIn('us')).to.have.length(4);
    const countries = ['us', 'de', 'se'];
    const holds = async (country: string, when: string, times = 2): Promise<string> => {
      let ip = '';
      for (let i = 0; i < times; i++) {
        ip = await exitIpOf(suite.svc, `geo-${country}-country-${country}`);
        expect(exitsIn(country), `geo-${country} ${when}, request ${i}`).to.include(ip);
      }
      return ip;
    };
    for (const country of countries) {
      await holds(country, 'when new', 3);
      const view = await api.session(`geo-${country}`);
      expect(view.params).to.deep.equal({ countries: [country], lifetime_secs: null, mode: 'sticky' });
      expect(view.exit_country).to.equal(country);
    }
    // Each through a rotation. us has other exits: the rotation moves to one of them. de and se
    // have one each: whatever the rotation finds, the session stays in its country.
    const firstUs = await holds('us', 'before its rotation', 1);
    for (const country of countries) {
      const rotated = await rotate(`geo-${country}`);
      if (country === 'us') expect(rotated.new_exit, rotated.exit_note).to.equal(true);
      await holds(country, `after its rotation (${JSON.stringify(rotated)})`);
      expect((await api.session(`geo-${country}`)).exit_country).to.equal(country);
    }
    const after = await holds('us', 'after its rotation', 1);
    expect(after).to.not.equal(firstUs);
    // Burn that exit: the quarantine moves the session to another us exit, never out of us.
    const burnt = (await api.session('geo-us')).instance;
    await whileExitServesCaptcha(suite.svc, after, ROTATION_GRACE_MS + 500, async () => {
      for (let i = 0; i < 2; i++) {
        expect((await fetchThroughSession(suite.svc, 'geo-us-country-us')).kind).to.equal('captcha');
        await api.reportFailure('geo-us', { kind: 'captcha' });
      }
      const quarantined = await api.json<AuditEvent[]>('/api/events?type=quarantine&limit=50');
      expect(
        quarantined.some((e) => e.instance === burnt),
        `instance ${burnt} quarantined: ${JSON.stringify(quarantined.map((e) => e.message))}`,
      ).to.equal(true);
      const moved = await pollUntil('served in us again', () => fetchThroughSession(suite.svc, 'geo-us-country-us'), 60_000, {
        until: (f) => f.kind === 'ip' && f.ip !== after,
      });
      expect(moved.kind === 'ip' && exitsIn('us').includes(moved.ip), JSON.stringify(moved)).to.equal(true);
    });
    await holds('us', 'after the quarantine');
    for (const country of ['de', 'se']) await holds(country, 'after the us quarantine');
    // The same grammar on the HTTP proxy.
    const http = await curlHttp(suite.svc.httpPort, 'web-de-country-de', TEST_PROXY_TOKEN, suite.svc.whoamiUrl);
    expect(http.code, http.stderr).to.equal(0);
    expect(exitsIn('de')).to.include(http.stdout.trim());
    const metrics = (await api.metricsText()).text;
    expect(metrics).to.match(/^pool_sessions_by_country\{country="us"\} 1$/m);
  });

  it('gives an instance an exit in a country none serves, within the bound, for the first request', async () => {
    const assigned = new Set((await api.instances()).map((i) => i.assigned_exit?.country));
    const unserved = [...new Set(suite.svc.net.exits.map((e) => e.egressCountry))].find((c) => !assigned.has(c)) as string;
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

  it('reads a dash of the key written %252D in a proxy URL (curl decodes the URL once) as part of the key, on both listeners', async () => {
    // As docs/api.md tells URL-based clients: the key `esc-a-mode-rotating` with a country, its dashes %2D, the % itself %25.
    const escaped = `esc%252Da%252Dmode%252Drotating-country-de:${TOKEN_IN_URL}`;
    const http = await curl(['-x', `http://${escaped}@127.0.0.1:${suite.svc.httpPort}`, suite.svc.whoamiUrl]);
    expect(http.code, http.stderr).to.equal(0);
    const view = await api.session('esc-a-mode-rotating');
    expect(view.params, 'the whole key, in de, not rotating').to.deep.equal({ countries: ['de'], lifetime_secs: null, mode: 'sticky' });
    const socks = await curl(['--socks5-hostname', `${escaped.replace('esc', 'socks')}@127.0.0.1:${suite.svc.socksPort}`, suite.svc.whoamiUrl]);
    expect(socks.code, socks.stderr).to.equal(0);
    expect((await api.session('socks-a-mode-rotating')).params.countries).to.deep.equal(['de']);
    // %2D alone in the URL reaches the service as a dash: the key is cut short and the rest read as a mode.
    const once = await curl(['-x', `http://once%2Da%2Dmode%2Drotating-country-de:${TOKEN_IN_URL}@127.0.0.1:${suite.svc.httpPort}`, suite.svc.whoamiUrl]);
    expect(once.code, once.stderr).to.equal(0);
    expect((await api.session('once-a')).params.mode).to.equal('rotating');
    expect((await api.raw('/api/sessions/once-a-mode-rotating')).status).to.equal(404);
  });

  it('expires a session at its own lifetime while others stay', async () => {
    await exitIpOf(suite.svc, 'lasting');
    const minute = await curlHttp(suite.svc.httpPort, 'minute-sesstime-1', TEST_PROXY_TOKEN, suite.svc.whoamiUrl);
    expect(minute.code, minute.stderr).to.equal(0);
    await exitIpOf(suite.svc, 'brief-ttl-3s');
    const lastUsed = Date.now();
    expect((await api.session('brief')).params.lifetime_secs).to.equal(3);
    expect((await api.session('minute')).params.lifetime_secs, 'sesstime is minutes').to.equal(60);
    // Not before its time: still there two seconds into its three.
    await sleep(lastUsed + 2_000 - Date.now());
    expect((await api.raw('/api/sessions/brief')).status, 'within its lifetime').to.equal(200);
    await pollUntil('the brief session expired', () => api.raw('/api/sessions/brief').then((r) => r.status), 15_000, { until: (s) => s === 404 });
    expect(Date.now() - lastUsed, 'gone no sooner than its lifetime').to.be.at.least(3_000);
    expect((await api.session('lasting')).key).to.equal('lasting');
    expect((await api.session('minute')).key, 'its own minute has not passed').to.equal('minute');
  });

  it('gives consecutive connections of a rotating session different exits, counted and healed as one session', async () => {
    const ips: string[] = [];
    for (let i = 0; i < 5; i++) ips.push(await exitIpOf(suite.svc, 'each-mode-rotating'));
    for (let i = 1; i < ips.length; i++) expect(ips[i], `connection ${i}: ${ips.join(' ')}`).to.not.equal(ips[i - 1]);
    const view: SessionView = await pollUntil('counted', () => api.session('each'), 5_000, { until: (v: SessionView) => v.requests === 5 });
    expect(view.params.mode).to.equal('rotating');
    // Healed: a failure it reports is scored against the instance that served its last connection.
    const before = (await api.instance(view.instance)).health.client_failures;
    const report = await api.reportFailure('each', { kind: 'captcha' });
    expect(report).to.deep.include({ session: 'each', instance: view.instance, scored: true });
    expect((await api.instance(view.instance)).health.client_failures).to.equal(before + 1);
  });
});
