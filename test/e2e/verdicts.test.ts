/**
 * Verdicts you can trust (supervisor/verdicts/README.md), each reproduction of docs/security.md's
 * threat table ("Verdicts") on the private network with real clients (curl).
 */
import { expect } from 'chai';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ExitsView, FailureResult, InstanceView } from '../../shared/api/views.js';
import type { CreatedToken } from '../../shared/auth/token-record.js';
import { HealApi } from '../support/clients/api-client.js';
import { curl, curlSocks } from '../support/clients/curl.js';
import { exitIpOf, fetchThroughSession } from '../support/clients/session-fetch.js';
import { TEST_PROXY_TOKEN, withService, type RunningService } from '../support/fixtures/service.js';
import { pollUntil } from '../support/waiting.js';

/** Reports within ROTATION_GRACE of an instance's rotation are not scored: the suites keep it short and wait it out. */
const ROTATION_GRACE_MS = 1_000;
const READY_TIMEOUT_MS = 120_000;

/** A request through `key` with `token` as the password; the address whoami answered, or why not. */
async function exitThrough(svc: RunningService, key: string, token: string): Promise<string> {
  const r = await curlSocks(svc.socksPort, key, token, svc.whoamiUrl);
  expect(r.code, `${key}: ${r.stderr}`).to.equal(0);
  return r.stdout.trim();
}

function report(api: HealApi, key: string, token: string, body: unknown = { kind: 'captcha' }): Promise<FailureResult> {
  return api.json<FailureResult>(`/api/sessions/${encodeURIComponent(key)}/failure`, { method: 'POST', body, bearer: token });
}

async function issue(api: HealApi, name: string, owner: string): Promise<string> {
  const t = await api.json<CreatedToken>('/api/tokens', { method: 'POST', body: { name, scope: 'proxy', owner } }, 201);
  return t.secret;
}

function bansForEveryone(v: ExitsView): ExitsView['bans'] {
  return v.bans.filter((b) => b.domain === '');
}

describe('verdicts: one client cannot burn exits for everyone (private network)', function () {
  this.timeout(300_000);

  describe('one proxy token, within every budget', () => {
    const suite = withService({ POOL_SIZE: '4', ROTATION_GRACE: `${ROTATION_GRACE_MS}ms`, FAILURE_WINDOW: '60s', REMEDIATION_BACKOFF_BASE: '2s' }, { ready: 4, readyTimeoutMs: READY_TIMEOUT_MS });
    let api: HealApi;
    before(async () => {
      api = await HealApi.signIn(suite.svc);
    });

    it('reports captchas on every country’s exit and bans none of them for everyone: another token still gets every country', async () => {
      const countries = [...new Set(suite.svc.net.exits.map((e) => e.country ?? ''))].filter((c) => c !== '');
      for (const cc of countries) {
        const key = `atk${cc}-country-${cc}`;
        await exitThrough(suite.svc, key, TEST_PROXY_TOKEN);
        await sleep(ROTATION_GRACE_MS + 200);
        for (let i = 0; i < 3; i++) {
          const answer = await report(api, `atk${cc}`, TEST_PROXY_TOKEN);
          expect(answer.scored, `${cc} report ${i}`).to.equal(true);
        }
      }
      const exits = await api.json<ExitsView>('/api/exits');
      expect(bansForEveryone(exits), 'one party’s word bans nothing for everyone').to.deep.equal([]);
      // Another client's sessions, in every country, are served.
      const victim = await issue(api, 'victim', 'victim-co');
      for (const cc of countries) {
        const ip = await pollUntil(`a session in ${cc}`, async () => {
          const r = await curlSocks(suite.svc.socksPort, `victim${cc}-country-${cc}`, victim, suite.svc.whoamiUrl);
          return r.code === 0 ? r.stdout.trim() : undefined;
        }, 60_000, 500);
        const expected = suite.svc.net.exits.filter((e) => e.country === cc).map((e) => e.address);
        expect(expected, `${cc} served through one of its exits`).to.include(ip);
      }
      // Plain sessions are served through distinct exits, none banned.
      await pollUntil('every instance routable', () => api.pool(), 90_000, { until: (p) => p.routable === 4 });
      const instances = await api.instances();
      const assigned = instances.map((i) => i.assigned_exit?.fingerprint ?? '');
      if (new Set(assigned).size !== 4) {
        const shown = instances.map((i) => ({ id: i.id, state: i.health.state, rotating: i.rotating, exit: i.assigned_exit?.nickname, distinct: i.assigned_exit?.distinct }));
        const exits = await api.json<ExitsView>('/api/exits');
        expect.fail(`4 distinct exits, got ${assigned.join(', ')}; instances ${JSON.stringify(shown)}; shortages ${JSON.stringify(exits.shortages)}; newest events ${JSON.stringify(await api.trail(60))}`);
      }
    });

    it('refuses ip: session keys of other addresses on both listeners (SOCKS reply 2, HTTP 400 with Proxy-Status)', async () => {
      const socks = await curlSocks(suite.svc.socksPort, 'ip:127.0.0.2-country-jp', TEST_PROXY_TOKEN, suite.svc.whoamiUrl);
      expect(socks.code, 'curl fails the CONNECT').to.not.equal(0);
      expect(socks.stderr).to.match(/not allowed|rule ?set|connection not allowed|\(2\)/i);
      const http = await curl(['-sS', '-i', '-x', `http://ip%253A127.0.0.2-mode-rotating:${TEST_PROXY_TOKEN}@127.0.0.1:${suite.svc.httpPort}`, suite.svc.whoamiUrl]);
      expect(http.stdout).to.match(/^HTTP\/1\.1 400 /);
      expect(http.stdout).to.match(/^Proxy-Status: exitpool; error=http_request_error; details="session key: keys starting with ip:/im);
      // Nobody's session moved to Japan or went rotating.
      expect((await api.sessions()).map((s) => s.key).filter((k) => k.startsWith('ip:127.0.0.2'))).to.deep.equal([]);
    });
  });

  describe('an honest scraper whose token spent its report budget', () => {
    const suite = withService({ POOL_SIZE: '4', CLIENT_REPORT_BUDGET: '2/1m', ROTATION_GRACE: `${ROTATION_GRACE_MS}ms` }, { ready: 4, readyTimeoutMs: READY_TIMEOUT_MS });
    let api: HealApi;
    before(async () => {
      api = await HealApi.signIn(suite.svc);
    });
    afterEach(() => suite.svc?.net.whoami.clearBehaviours());

    it('still moves its session off a captcha exit at the first report, at once', async () => {
      // Other sessions of the same token spend its budget first.
      for (let i = 0; i < 2; i++) {
        await exitThrough(suite.svc, `spender-${i}`, TEST_PROXY_TOKEN);
        expect((await report(api, `spender-${i}`, TEST_PROXY_TOKEN, { kind: 'other' })).scored).to.equal(true);
      }
      const key = 'scraper-loop';
      const ip = await exitIpOf(suite.svc, key);
      suite.svc.net.whoami.setBehaviour(ip, 'captcha');
      expect((await fetchThroughSession(suite.svc, key)).kind).to.equal('captcha');
      const started = Date.now();
      const answer = await report(api, key, TEST_PROXY_TOKEN);
      expect(answer).to.include({ scored: false, moved: true });
      expect(answer.exit_ip).to.not.equal(ip);
      const next = await fetchThroughSession(suite.svc, key);
      expect(next, 'the next request leaves through another exit').to.deep.include({ kind: 'ip' });
      expect(next.kind === 'ip' && next.ip).to.not.equal(ip);
      // Far below the 45 s the session was stuck before: the move is part of the answer.
      expect(Date.now() - started).to.be.below(15_000);
    });
  });

  describe('failing destinations', () => {
    const suite = withService({ POOL_SIZE: '4', ROTATION_GRACE: `${ROTATION_GRACE_MS}ms` }, { ready: 4, readyTimeoutMs: READY_TIMEOUT_MS });
    let api: HealApi;
    before(async () => {
      api = await HealApi.signIn(suite.svc);
    });

    it('bans nothing for a flood of names that do not exist (more than the checks that can run) nor for a closed port behind a name', async () => {
      const key = 'typo-client';
      await exitIpOf(suite.svc, key);
      const instance = (await api.session(key)).instance;
      const flood = await Promise.all(Array.from({ length: 12 }, (_, i) => fetchThroughSession(suite.svc, key, `http://no-such-name-${i}.invalid/`)));
      expect(flood.every((f) => f.kind === 'failed')).to.equal(true);
      const closed = await Promise.all(Array.from({ length: 3 }, () => fetchThroughSession(suite.svc, key, 'http://whoami.testnet:9/')));
      expect(closed.every((f) => f.kind === 'failed')).to.equal(true);
      // Let every check answer.
      await sleep(5_000);
      const v = await api.instance(instance);
      expect(v.health.state, 'the exit is not burnt').to.be.oneOf(['healthy']);
      expect(v.health.failure_score).to.equal(0);
      expect(v.totals.failures, 'still counted as failed requests').to.be.at.least(15);
      const exits = await api.json<ExitsView>('/api/exits');
      expect(exits.bans).to.deep.equal([]);
      expect((await api.instances()).every((i: InstanceView) => i.health.state !== 'quarantined')).to.equal(true);
    });

    it('bans nothing for a report naming a site the session never reached, and keeps the evidence already there', async () => {
      const a = 'reader-a';
      await exitIpOf(suite.svc, a);
      const instance = (await api.session(a)).instance;
      // Another client's session there (a report moves its credential's sessions through the exit).
      const other = await issue(api, 'reader b', 'reader-b');
      let b = '';
      for (let i = 0; i < 30 && b === ''; i++) {
        await exitIpOf(suite.svc, `reader-b-${i}`, other);
        if ((await api.session(`reader-b-${i}`)).instance === instance) b = `reader-b-${i}`;
      }
      expect(b, 'a second session on the same instance').to.not.equal('');
      await sleep(ROTATION_GRACE_MS + 200);
      await report(api, a, TEST_PROXY_TOKEN, { kind: 'other' });
      const before = (await api.instance(instance)).health;
      expect(before.failures_in_window).to.equal(1);
      expect((await api.session(b)).instance, "the other client's session stayed").to.equal(instance);
      const answer = await report(api, b, other, { kind: 'captcha', domain: 'shop.testnet' });
      expect(answer.moved, 'its own session still moves').to.equal(true);
      const exits = await api.json<ExitsView>('/api/exits');
      expect(exits.bans, 'shop.testnet was never reached through that exit').to.deep.equal([]);
      const after = (await api.instance(instance)).health;
      expect(after.failures_in_window, 'nothing erased: the earlier report stays').to.equal(2);
      const logged = (await api.events(50)).find((e) => e.session === b && e.details.kind === 'captcha');
      expect(logged?.details).to.include({ domain: 'shop.testnet', site_seen: false });
    });
  });

  describe('two independent reporters', () => {
    const suite = withService({ POOL_SIZE: '4', ROTATION_GRACE: `${ROTATION_GRACE_MS}ms` }, { ready: 4, readyTimeoutMs: READY_TIMEOUT_MS });
    let api: HealApi;
    before(async () => {
      api = await HealApi.signIn(suite.svc);
    });

    it('ban an exit for everyone: tokens of two owners each report a captcha through it; its instance moves to another exit', async () => {
      // A country with two exits: banning one leaves the per-country floor (MIN_ELIGIBLE_EXITS_PER_COUNTRY) kept.
      const byCountry = new Map<string, number>();
      for (const e of suite.svc.net.exits) if (e.country) byCountry.set(e.country, (byCountry.get(e.country) ?? 0) + 1);
      const cc = [...byCountry].find(([, n]) => n >= 2)?.[0] as string;
      expect(cc, 'the test network has a country with two exits').to.be.a('string');
      const acme = await issue(api, 'acme scraper', 'acme');
      const globex = await issue(api, 'globex scraper', 'globex');
      const first = `acme-1-country-${cc}`;
      const ip = await pollUntil(`a session in ${cc}`, async () => {
        const r = await curlSocks(suite.svc.socksPort, first, acme, suite.svc.whoamiUrl);
        return r.code === 0 ? r.stdout.trim() : undefined;
      }, 60_000, 500);
      const instance = (await api.session(`acme-1`)).instance;
      const fingerprint = (await api.instance(instance)).assigned_exit?.fingerprint as string;
      // The second owner's session on the same instance (sessions of one country share its instances).
      let second = '';
      for (let i = 0; i < 20 && second === ''; i++) {
        const key = `globex-${i}-country-${cc}`;
        await exitThrough(suite.svc, key, globex);
        if ((await api.session(`globex-${i}`)).instance === instance) second = `globex-${i}`;
      }
      expect(second, 'a globex session on the same exit').to.not.equal('');
      await sleep(ROTATION_GRACE_MS + 200);
      expect((await report(api, 'acme-1', acme)).moved).to.equal(true);
      expect(bansForEveryone(await api.json<ExitsView>('/api/exits')), 'one owner is not enough').to.deep.equal([]);
      await report(api, second, globex);
      const exits = await pollUntil('the exit banned for everyone', () => api.json<ExitsView>('/api/exits'), 10_000, { until: (v) => bansForEveryone(v).some((b) => b.fingerprint === fingerprint) });
      const ban = bansForEveryone(exits).find((b) => b.fingerprint === fingerprint);
      expect(ban?.address).to.equal(ip);
      expect(ban?.reason).to.match(/2 independent reporters \(owner:acme, owner:globex\)/);
      await pollUntil('no instance on the banned exit', () => api.instances(), 60_000, {
        until: (all: InstanceView[]) => all.every((i) => i.assigned_exit?.fingerprint !== fingerprint),
      });
    });
  });
});
