/**
 * Exits, not instances (issue 17), end to end on the private network: its 8 exits sit in 7
 * /24s (two share one, two declare one family) in 7 countries (the service fixture gives the
 * pool the network's exit list, so every exit's /24 is known from the start; exits that leave
 * from another /24 are test/e2e/egress.test.ts's). The pool assigns each instance
 * its own exit, a session rotation leaves through an exit none of its last EXIT_HISTORY,
 * a captcha quarantine bans the exit, and a catalog too small for distinct exits says so.
 */
import { expect } from 'chai';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ExitsView, InstanceView, SessionRotateResult } from '../../shared/api/views.js';
import { addressBlock } from '../../supervisor/exits/exit-relay.js';
import { HealApi } from '../support/clients/api-client.js';
import { curlHttp } from '../support/clients/curl.js';
import { exitIpOf, fetchThroughSession } from '../support/clients/session-fetch.js';
import { startService, TEST_PROXY_TOKEN, withService, type RunningService } from '../support/fixtures/service.js';
import { pollUntil } from '../support/waiting.js';
import { documentationGaps, loadOpenApiDocument } from '../support/parsers/openapi-document.js';

const READY_TIMEOUT_MS = 120_000;
/** The sessions' history in the suite of 4 below (the default): a rotation must find a /24 outside the current one and the last EXIT_HISTORY, of the network's 7. */
const EXIT_HISTORY = 5;
/** Reports within ROTATION_GRACE of an instance's rotation are not held against it (proxy rule 5): kept short here. */
const ROTATION_GRACE_MS = 1000;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Sends requests under fresh keys until every instance has served one; returns instance → the IP whoami saw. */
async function exitIpsByInstance(svc: RunningService, api: HealApi, size: number, prefix: string): Promise<Map<number, string>> {
  const seen = new Map<number, string>();
  for (let i = 0; i < 40 && seen.size < size; i++) {
    const key = `${prefix}-${i}`;
    const ip = await exitIpOf(svc, key);
    const instance = (await api.session(key)).instance;
    const before = seen.get(instance);
    if (before !== undefined) expect(ip, `instance ${instance} left through two exits`).to.equal(before);
    seen.set(instance, ip);
  }
  expect(seen.size, 'every instance served a request').to.equal(size);
  return seen;
}

/** Fresh starts of a pool of 4 in the first test: each draws its exits anew, weighted at random. */
const RESTARTS = 5;

describe('exits: distinct exit IPs, a new IP per rotation, burnt exits banned (private network)', function () {
  this.timeout(600_000);

  it('serves a pool of 4 through 4 distinct IPs in distinct /24s, over several restarts', async () => {
    for (let run = 0; run < RESTARTS; run++) {
      const svc = await startService({ POOL_SIZE: '4' });
      try {
        await svc.waitReady(4, READY_TIMEOUT_MS);
        const api = await HealApi.signIn(svc);
        await pollUntil('4 instances ready', () => api.pool(), READY_TIMEOUT_MS, { until: (p) => p.ready === 4 && p.routable === 4 });
        const ips = [...(await exitIpsByInstance(svc, api, 4, `distinct-${run}`)).values()];
        expect(new Set(ips).size, `run ${run}: ${ips.join(' ')}`).to.equal(4);
        expect(new Set(ips.map(addressBlock)).size, `run ${run}: /24s of ${ips.join(' ')}`).to.equal(4);
        const instances = await api.instances();
        for (const i of instances) {
          expect(i.assigned_exit, `instance ${i.id}`).to.not.equal(null);
          expect(i.assigned_exit?.distinct).to.equal(true);
          expect(i.pinned_exit).to.equal(i.assigned_exit?.fingerprint);
          expect(i.exit_shortage).to.equal('');
        }
        const exits = await api.json<ExitsView>('/api/exits');
        expect(exits).to.deep.include({ assigning: true, distinct_by: 'subnet', in_use: 4, eligible: 8, capacity: 7 });
        expect(exits.shortages).to.deep.equal([]);
        expect(exits.exits.filter((e) => e.instances.length > 0)).to.have.lengthOf(4);
        const metrics = (await api.metricsText()).text;
        expect(metrics).to.match(/^pool_exits_in_use 4$/m);
        expect(metrics).to.match(/^pool_exits_eligible 8$/m);
        expect(metrics).to.match(/^pool_exits_banned 0$/m);
      } catch (error) {
        await svc.stop();
        throw error;
      }
      expect(await svc.stop(), `run ${run}: a clean shutdown`).to.equal(0);
    }
  });

  it('keeps a declared family apart with EXIT_DISTINCT=family: the family is read from the real microdescriptors', async () => {
    const svc = await startService({ POOL_SIZE: '4', EXIT_DISTINCT: 'family' });
    try {
      await svc.waitReady(4, READY_TIMEOUT_MS);
      const api = await HealApi.signIn(svc);
      const declared = svc.net.exits.filter((e) => e.family.length > 0);
      expect(declared, 'the test network declares one family of two').to.have.length(2);
      // Microdescriptors may arrive after the first catalog read: the next refresh asks again.
      const exits = await pollUntil('the family known to the catalog', () => api.json<ExitsView>('/api/exits'), 90_000, {
        until: (v) => new Set(v.exits.filter((e) => declared.some((d) => d.fingerprint === e.fingerprint)).map((e) => e.family)).size === 1,
      });
      // 8 exits, 7 /24s, and the family pair in two of them: 6 units.
      expect(exits).to.deep.include({ distinct_by: 'family', eligible: 8, capacity: 6 });
      const others = exits.exits.filter((e) => !declared.some((d) => d.fingerprint === e.fingerprint));
      for (const e of others) expect(e.family, e.nickname).to.equal(e.fingerprint);
      await pollUntil('every instance on an exit of its own family', () => api.instances(), 60_000, {
        until: (is) => is.every((i) => i.assigned_exit !== null && i.assigned_exit.distinct),
      });
      const families = (await api.instances()).map((i) => i.assigned_exit?.family);
      expect(new Set(families).size, families.join(' ')).to.equal(4);
    } finally {
      await svc.stop();
    }
  });

  describe('with one service of 4', () => {
    const suite = withService(
      // Most countries of the test network have one exit: the per-country floor would withhold
      // every ban there (test/e2e/verdicts.test.ts proves the floors).
      { POOL_SIZE: '4', MIN_ELIGIBLE_EXITS_PER_COUNTRY: '0', CLIENT_REPORT_BUDGET: '1000/1m', FAILURE_WINDOW: '60s', REMEDIATION_BACKOFF_BASE: '2s', ROTATION_GRACE: `${ROTATION_GRACE_MS}ms`, EXIT_HEADER: '1', EXIT_HISTORY: String(EXIT_HISTORY) },
      { ready: 4, readyTimeoutMs: READY_TIMEOUT_MS },
    );
    let api: HealApi;
    before(async () => {
      api = await HealApi.signIn(suite.svc);
      await pollUntil('4 routable', () => api.pool(), READY_TIMEOUT_MS, { until: (p) => p.routable === 4 });
    });
    afterEach(() => suite.svc?.net.whoami.clearBehaviours());

    /** A GET whose answer must match docs/openapi.yaml: the exit views with real bans and assignments in them. */
    async function documentedGet<T>(path: string, bearer?: string): Promise<T> {
      const r = await api.raw(path, bearer === undefined ? {} : { bearer });
      const body = await r.text();
      const gaps = documentationGaps(loadOpenApiDocument(), { method: 'GET', path, status: r.status, contentType: r.headers.get('content-type'), body });
      expect(gaps, path).to.deep.equal([]);
      expect(r.status, path).to.equal(200);
      return JSON.parse(body) as T;
    }

    /** A proxy token issued to `owner`: tokens of different owners are independent reporters. */
    async function tokenOf(owner: string): Promise<string> {
      return (await api.json<{ secret: string }>('/api/tokens', { method: 'POST', body: { name: owner, scope: 'proxy', owner } }, 201)).secret;
    }

    /** Another session on `instance` (new keys go to the least loaded instance). */
    async function anotherSessionOn(instance: number, prefix: string): Promise<string> {
      for (let i = 0; i < 30; i++) {
        await exitIpOf(suite.svc, `${prefix}-${i}`);
        if ((await api.session(`${prefix}-${i}`)).instance === instance) return `${prefix}-${i}`;
      }
      throw new Error(`no ${prefix} session on instance ${instance}`);
    }

    /**
     * Places `key` and a second session on its instance, has the destination answer their exit
     * with a captcha, and has two reporters each report a captcha through it (naming `site` when
     * given): tokens of two owners for a ban for everyone; for a site, the site must be reached
     * through that exit. Returns where the session was and the bans once the exit is banned.
     */
    async function burnExit(key: string, site?: string): Promise<{ ip: string; instance: number; fingerprint: string; exits: ExitsView; second: string }> {
      await exitIpOf(suite.svc, key);
      const instance = (await api.session(key)).instance;
      // Earlier tests may have re-pinned this instance a moment ago: settled first, and only then
      // is the exit read that the captcha is served on (read before, it was once the exit the
      // instance was just leaving).
      await pollUntil('the instance settled', () => api.instance(instance), 20_000, { until: (v: InstanceView) => !v.rotating });
      const ip = await exitIpOf(suite.svc, key);
      const fingerprint = (await api.instance(instance)).assigned_exit?.fingerprint as string;
      const second = await anotherSessionOn(instance, `${key}-second`);
      const reporters = [await tokenOf(`${key}-acme`), await tokenOf(`${key}-globex`)];
      suite.svc.net.whoami.setBehaviour(ip, 'captcha');
      // Out of its rotation grace.
      await sleep(ROTATION_GRACE_MS + 500);
      const url = site === undefined ? suite.svc.whoamiUrl : `http://${site}:${suite.svc.net.whoami.port}/`;
      for (const [i, k] of [key, second].entries()) {
        expect((await fetchThroughSession(suite.svc, k, url)).kind).to.equal('captcha');
        const body = site === undefined ? { kind: 'captcha' } : { kind: 'captcha', domain: site.toUpperCase() };
        await api.json(`/api/sessions/${k}/failure`, { method: 'POST', body, bearer: reporters[i] as string });
      }
      const exits = await pollUntil('the exit banned', () => api.json<ExitsView>('/api/exits'), 10_000, { until: (v) => v.bans.some((b) => b.fingerprint === fingerprint) });
      return { ip, instance, fingerprint, exits, second };
    }

    it('names the exit in Exitpool-Exit on the HTTP proxy (EXIT_HEADER): plain responses and the CONNECT reply', async () => {
      const key = 'header-user';
      const ip = await exitIpOf(suite.svc, key);
      const plain = await curlHttp(suite.svc.httpPort, key, TEST_PROXY_TOKEN, suite.svc.whoamiUrl, ['-i']);
      expect(plain.code, plain.stderr).to.equal(0);
      expect(plain.stdout).to.match(new RegExp(`^Exitpool-Exit: ${ip.replace(/\./g, '\\.')}\r$`, 'm'));
      expect(plain.stdout.trim().endsWith(ip)).to.equal(true);
      const tunnelled = await curlHttp(suite.svc.httpPort, key, TEST_PROXY_TOKEN, suite.svc.whoamiUrl, ['-i', '-p']);
      expect(tunnelled.code, tunnelled.stderr).to.equal(0);
      expect(tunnelled.stdout).to.match(new RegExp(`^HTTP/1.1 200 Connection Established\r\nExitpool-Exit: ${ip.replace(/\./g, '\\.')}\r$`, 'm'));
    });

    it(`moves a session to a new IP on each of 30 rotations, never one of its last ${EXIT_HISTORY} nor their /24s`, async () => {
      const key = 'rotating-30';
      const history: string[] = [await exitIpOf(suite.svc, key)];
      for (let i = 0; i < 30; i++) {
        const r = await api.json<SessionRotateResult>(`/api/sessions/${key}/rotate`, { method: 'POST', bearer: TEST_PROXY_TOKEN });
        expect(r.new_exit, `rotation ${i}: ${r.exit_note}`).to.equal(true);
        const ip = await exitIpOf(suite.svc, key);
        const recent = history.slice(-EXIT_HISTORY);
        expect(recent, `rotation ${i} left through ${ip}`).to.not.include(ip);
        expect(recent.map(addressBlock), `rotation ${i}: /24 of ${ip}`).to.not.include(addressBlock(ip));
        history.push(ip);
      }
      const s = await api.session(key);
      expect(s.recent_exits).to.deep.equal(history.slice(-EXIT_HISTORY - 1, -1).slice(-EXIT_HISTORY));
      expect(s.exit_ip).to.equal(history.at(-1));
      // The session view tells a proxy token its own exit.
      const asProxy = await api.json<{ exit_ip: string }>(`/api/sessions/${key}`, { bearer: TEST_PROXY_TOKEN });
      expect(asProxy.exit_ip).to.equal(history.at(-1));
    });

    it('bans an exit two independent reporters complained about: no instance leaves through it again within the ban', async () => {
      const key = 'burnt-exit';
      const { ip, instance, fingerprint, exits } = await burnExit(key);
      const ban = exits.bans.find((b) => b.fingerprint === fingerprint);
      expect(ban).to.deep.include({ address: ip, cause: 'captcha' });
      expect(Date.parse(ban?.until ?? '') - Date.now()).to.be.greaterThan(60 * 60_000);
      expect((await api.metricsText()).text).to.match(/^pool_exits_banned 1$/m);
      // The exit views with a ban and assignments in them are what docs/openapi.yaml says.
      expect((await documentedGet<ExitsView>('/api/exits')).bans.map((b) => b.fingerprint)).to.include(fingerprint);
      expect((await documentedGet<InstanceView>(`/api/instances/${instance}`)).id).to.equal(instance);
      expect((await documentedGet<{ key: string }>(`/api/sessions/${key}`, TEST_PROXY_TOKEN)).key).to.equal(key);
      // The session moved at once, off the burnt exit.
      const moved = await exitIpOf(suite.svc, key);
      expect(moved).to.not.equal(ip);
      // The ban moves its instance to another exit (never the banned one).
      await pollUntil('the instance back with another exit', () => api.instance(instance), 90_000, {
        until: (v: InstanceView) => ['healthy', 'probation', 'degraded'].includes(v.health.state) && v.assigned_exit !== null && v.assigned_exit.fingerprint !== fingerprint,
      });
      const events = await api.events(200);
      expect(events.some((e) => e.type === 'exit' && e.details.cause === 'captcha' && e.details.fingerprint === fingerprint)).to.equal(true);
      for (const round of [0, 1]) {
        if (round === 1) {
          const swept = (await api.rotatePool()).rotating;
          // The sweep rotates one instance at a time in the background: sample once it is over.
          await pollUntil('the pool rotate sweep over', async () => {
            const sweeps = (await api.events(500)).filter((e) => e.type === 'rotate' && e.details.by === 'sweep').length;
            return sweeps >= swept && (await api.instances()).every((i) => !i.rotating) ? true : undefined;
          }, 90_000);
        }
        const seen = await exitIpsByInstance(suite.svc, api, 4, `after-ban-${round}`);
        expect([...seen.values()], `round ${round}`).to.not.include(ip);
        for (const i of await api.instances()) expect(i.assigned_exit?.fingerprint, `instance ${i.id}`).to.not.equal(fingerprint);
      }
      // An operator can lift the ban.
      const lifted = await api.raw(`/api/exits/${fingerprint}/ban`, { method: 'DELETE' });
      expect(lifted.status).to.equal(204);
      expect((await api.json<ExitsView>('/api/exits')).bans.map((b) => b.fingerprint)).to.not.include(fingerprint);
      expect((await api.raw(`/api/exits/${fingerprint}/ban`, { method: 'DELETE' })).status).to.equal(404);
      expect((await api.raw('/api/exits/not-a-fingerprint/ban', { method: 'DELETE' })).status).to.equal(400);
      expect((await api.raw(`/api/exits/${fingerprint}/ban`, { method: 'DELETE', bearer: TEST_PROXY_TOKEN })).status).to.equal(403);
    });

    it('bans an exit for one site when only that site complained: other sites keep it, and the session avoids it', async () => {
      const key = 'shop-user';
      const site = 'shop.testnet';
      const eligibleBefore = (await api.json<ExitsView>('/api/exits')).eligible;
      // Another session on the same exit, which never visits that site.
      await exitIpOf(suite.svc, key);
      const instance = (await api.session(key)).instance;
      let bystander = '';
      for (let i = 0; i < 12 && bystander === ''; i++) {
        await exitIpOf(suite.svc, `news-reader-${i}`);
        if ((await api.session(`news-reader-${i}`)).instance === instance) bystander = `news-reader-${i}`;
      }
      expect(bystander, 'a second session placed on the same instance').to.not.equal('');
      const { ip, fingerprint, exits, second } = await burnExit(key, site);
      expect(exits.bans.filter((b) => b.fingerprint === fingerprint).map((b) => b.domain)).to.deep.equal([site]);
      expect(exits.exits.find((e) => e.fingerprint === fingerprint)?.banned, 'not banned for everyone').to.equal(null);
      expect(exits.eligible, 'still eligible for other sites').to.equal(eligibleBefore);
      expect((await documentedGet<ExitsView>('/api/exits')).bans.map((b) => b.domain)).to.include(site);
      suite.svc.net.whoami.clearBehaviours();
      // The exit keeps serving the other site's session: no quarantine, no move, the same IP.
      const served = await api.instance(instance);
      expect(served.health.state, 'the instance stays in service').to.be.oneOf(['healthy', 'degraded']);
      expect(served.assigned_exit?.fingerprint).to.equal(fingerprint);
      expect((await api.session(bystander)).instance).to.equal(instance);
      expect(await exitIpOf(suite.svc, bystander)).to.equal(ip);
      // The first reporter's own report moved it; the ban moved the other session that reached the site.
      const moves = (await api.events(300)).filter((e) => e.type === 'assignment');
      expect(moves.filter((e) => e.details.reason === 'site_ban').map((e) => e.session)).to.deep.equal([second]);
      expect(moves.some((e) => e.details.reason === 'report' && e.session === key && e.details.from !== e.details.to)).to.equal(true);
      // The session that reported the site never rotates back onto that exit.
      for (let i = 0; i < 10; i++) {
        const r = await api.json<SessionRotateResult>(`/api/sessions/${key}/rotate`, { method: 'POST', bearer: TEST_PROXY_TOKEN });
        expect(r.exit_ip, `rotation ${i}`).to.not.equal(ip);
        expect(await exitIpOf(suite.svc, key)).to.not.equal(ip);
      }
      expect((await api.session(key)).exit_ip).to.not.equal(ip);
      expect((await api.raw(`/api/exits/${fingerprint}/ban`, { method: 'DELETE' })).status).to.equal(204);
    });
  });

  it('blames the destination, not the exit, for names that do not exist: five of them quarantine nothing, and nobody else is moved', async () => {
    const svc = await startService({ POOL_SIZE: '3' });
    try {
      await svc.waitReady(3, READY_TIMEOUT_MS);
      const api = await HealApi.signIn(svc);
      const victim = 'new-user';
      await exitIpOf(svc, victim);
      const instance = (await api.session(victim)).instance;
      // Another client on the same exit: it must not be moved by the first one's mistakes.
      let bystander = '';
      for (let i = 0; i < 30 && bystander === ''; i++) {
        await exitIpOf(svc, `other-client-${i}`);
        if ((await api.session(`other-client-${i}`)).instance === instance) bystander = `other-client-${i}`;
      }
      expect(bystander, 'a second session on the same instance').to.not.equal('');
      for (let i = 0; i < 5; i++) {
        const r = await fetchThroughSession(svc, victim, `http://no-such-name-${i}.invalid/`);
        expect(r.kind).to.equal('failed');
      }
      const metrics = await pollUntil('five failures blamed on their destinations', async () => (await api.metricsText()).text, 30_000, {
        until: (t) => /^pool_failures_blamed_on_destination_total 5$/m.test(t),
      });
      expect(metrics).to.match(/^pool_failures_blamed_on_destination_total 5$/m);
      const v = await api.instance(instance);
      expect(v.health.state, 'the exit is not burnt').to.equal('healthy');
      expect(v.health.failure_score).to.equal(0);
      expect(v.totals.failures, 'still counted as failed requests').to.be.at.least(5);
      expect((await api.session(victim)).instance).to.equal(instance);
      expect((await api.session(bystander)).instance, 'the other client stays on its exit').to.equal(instance);
      expect((await api.json<ExitsView>('/api/exits')).bans).to.deep.equal([]);
    } catch (error) {
      await svc.stop();
      throw error;
    }
    expect(await svc.stop(), 'a clean shutdown').to.equal(0);
  });

  it('scores an unresolvable name against nobody when no other exit can check it (pool of 1: a departure from the SPEC, docs/architecture.md)', async () => {
    const svc = await startService({ POOL_SIZE: '1' });
    try {
      await svc.waitReady(1, READY_TIMEOUT_MS);
      const api = await HealApi.signIn(svc);
      await exitIpOf(svc, 'alone');
      expect((await fetchThroughSession(svc, 'alone', 'http://no-such-name.invalid/')).kind).to.equal('failed');
      const v = await pollUntil('the failure counted', () => api.instance(0), 20_000, { until: (i: InstanceView) => i.totals.failures >= 1 });
      expect(v.health.failure_score, 'unknown: the destination could not be checked').to.equal(0);
      expect(v.health.state).to.equal('healthy');
      expect((await api.metricsText()).text).to.match(/^pool_failures_blamed_on_destination_total 0$/m);
    } catch (error) {
      await svc.stop();
      throw error;
    }
    expect(await svc.stop(), 'a clean shutdown').to.equal(0);
  });

  it('reports the shortage when the catalog has fewer eligible exits than instances, rather than hiding it, and again after a restart gives each instance its exit back', async () => {
    // de and nl are the two exits that share one /24: three instances, two exits, one /24.
    const env = { POOL_SIZE: '3', TOR_EXIT_NODES: '{de},{nl}', TOR_STRICT_NODES: '1', DATA_DIR: fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-shortage-')) };
    /** The shortage as the API tells it: two instances of three in it, each naming why, the third distinct. */
    const expectShortageSaid = async (api: HealApi, when: string): Promise<InstanceView[]> => {
      const exits = await pollUntil(`the shortage reported (${when})`, () => api.json<ExitsView>('/api/exits'), 30_000, { until: (v) => v.shortages.length === 2 });
      expect(exits, when).to.deep.include({ eligible: 2, capacity: 1, in_use: 2 });
      for (const shortage of exits.shortages) expect(shortage.reason, when).to.match(/shares its/);
      const instances = await api.instances();
      expect(instances.filter((i) => i.assigned_exit?.distinct === false), when).to.have.lengthOf(2);
      for (const i of instances) {
        if (i.assigned_exit?.distinct === false) expect(i.exit_shortage, `instance ${i.id} names its shortage (${when})`).to.not.equal('');
        else expect(i.exit_shortage, `instance ${i.id} (${when})`).to.equal('');
      }
      expect(new Set(instances.map((i) => i.assigned_exit?.country)), when).to.deep.equal(new Set(['de', 'nl']));
      return instances;
    };
    let svc = await startService(env);
    let before: InstanceView[];
    try {
      await svc.waitReady(3, READY_TIMEOUT_MS);
      const api = await HealApi.signIn(svc);
      await pollUntil('3 instances ready', () => api.pool(), READY_TIMEOUT_MS, { until: (p) => p.ready === 3 });
      await expectShortageSaid(api, 'first start');
      expect((await api.events(100)).some((e) => e.type === 'exit' && e.details.distinct === false)).to.equal(true);
      // A rotation cannot find a new /24 here, and says so instead of pretending.
      await exitIpOf(svc, 'short-supply');
      const r = await api.json<SessionRotateResult>('/api/sessions/short-supply/rotate', { method: 'POST', bearer: TEST_PROXY_TOKEN });
      expect(r.new_exit).to.equal(false);
      expect(r.exit_note).to.not.equal('');
      before = await api.instances();
    } catch (error) {
      await svc.stop();
      throw error;
    }
    expect(await svc.stop(), 'a clean shutdown').to.equal(0);
    // Started again on the same DATA_DIR: every instance takes back the exit it had, and the
    // shortage is said as before (an exit given back used to be distinct: false with no shortage named).
    svc = await startService(env);
    try {
      await svc.waitReady(3, READY_TIMEOUT_MS);
      const api = await HealApi.signIn(svc);
      await pollUntil('3 instances ready', () => api.pool(), READY_TIMEOUT_MS, { until: (p) => p.ready === 3 });
      const after = await expectShortageSaid(api, 'after the restart');
      expect(after.map((i) => [i.id, i.assigned_exit?.fingerprint]), 'each instance has its exit back').to.deep.equal(before.map((i) => [i.id, i.assigned_exit?.fingerprint]));
      expect((await api.events(100)).filter((e) => e.type === 'exit' && e.details.why === 'restored' && e.details.distinct === false).length, 'said in the audit trail').to.equal(2);
    } catch (error) {
      await svc.stop();
      throw error;
    }
    expect(await svc.stop(), 'a clean shutdown').to.equal(0);
    fs.rmSync(env.DATA_DIR, { recursive: true, force: true });
  });
});
