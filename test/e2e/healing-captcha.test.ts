import { expect } from 'chai';
import type { FailureResult, InstanceView } from '../../shared/api/views.js';
import { HealApi } from '../support/clients/api-client.js';
import { exitIpOf, fetchThroughSession, UnexpectedFetchError } from '../support/clients/session-fetch.js';
import { pollUntil } from '../support/waiting.js';
import { curlSocks } from '../support/clients/curl.js';
import { TEST_PROXY_TOKEN, withService } from '../support/fixtures/service.js';

const SERVICE_ENV = {
  POOL_SIZE: '3',
  FAILURE_WINDOW: '60s',
  REMEDIATION_BACKOFF_BASE: '2s',
  BOOTSTRAP_STALL_TIMEOUT: '30s',
  ROTATION_GRACE: '5s',
  // These scenarios send more reports with one token than CLIENT_REPORT_BUDGET scores by default.
  CLIENT_REPORT_BUDGET: '1000/1m',
};
/** Reports within ROTATION_GRACE of an instance's rotation are not held against it (proxy rule 5). */
const ROTATION_GRACE_MS = 5_000;
const QUARANTINE_SCORE = 5; // QUARANTINE_FAILURES default
const ROTATION_DEADLINE_MS = 60_000;
const BOOTSTRAP_DEADLINE_MS = 90_000;
const OUT_OF_SERVICE = ['quarantined', 'remediating'];

/** Where the captcha scenario left off, for the remediation test that follows it. */
interface Burnt {
  instance: number;
  ip: string;
  quarantinedAt: number;
}

describe('self-healing end to end (pool of 3 on the private network)', function () {
  this.timeout(300_000);
  let api: HealApi;
  let keySeq = 0;
  let burnt: Burnt | undefined;

  async function placeSession(prefix: string): Promise<{ key: string; instance: number; ip: string }> {
    const key = `${prefix}-${++keySeq}`;
    const ip = await exitIpOf(suite.svc, key);
    return { key, instance: (await api.session(key)).instance, ip };
  }

  /** A new session on `instance` (new keys go to the least loaded instance: the one a report just emptied). */
  async function sessionOn(instance: number, prefix: string, token = TEST_PROXY_TOKEN): Promise<string> {
    for (let i = 0; i < 30; i++) {
      const key = `${prefix}-${++keySeq}`;
      // Placed by any answer: the destination may be rate-limiting the exit.
      const got = await fetchThroughSession(suite.svc, key, suite.svc.whoamiUrl, token);
      if (got.kind === 'failed') throw new UnexpectedFetchError(key, got);
      if ((await api.session(key)).instance === instance) return key;
    }
    throw new Error(`no ${prefix} session landed on instance ${instance}`);
  }

  async function settled(): Promise<void> {
    await pollUntil('all instances routable', () => api.pool(), ROTATION_DEADLINE_MS, { until: (p) => p.routable === p.size });
  }

  const suite = withService(SERVICE_ENV, { ready: 3, readyTimeoutMs: BOOTSTRAP_DEADLINE_MS });
  before(async () => {
    api = await HealApi.signIn(suite.svc);
  });
  afterEach(() => suite.svc?.net.whoami.clearBehaviours());

  it('types failure reports by kind or reason, refuses only wrong JSON types, and moves the reported session', async () => {
    const s = await placeSession('report');
    const path = `/api/sessions/${s.key}/failure`;
    const post = (body?: unknown): Promise<Response> => api.raw(path, { method: 'POST', body, bearer: TEST_PROXY_TOKEN });
    const statusOf = async (r: Promise<Response>): Promise<number> => {
      const res = await r;
      await res.text();
      return res.status;
    };

    expect(await statusOf(api.raw('/api/sessions/no-such-session/failure', { method: 'POST', bearer: TEST_PROXY_TOKEN })), 'unknown session').to.equal(404);
    for (const bad of [{ kind: 5 }, { reason: {} }, { kind: ['captcha'] }, [1], '"captcha"']) {
      expect(await statusOf(post(bad)), JSON.stringify(bad)).to.equal(400);
    }
    expect((await api.instance(s.instance)).health.failure_score, 'a refused report changes nothing').to.equal(0);
    expect((await api.session(s.key)).instance, 'a refused report moves nothing').to.equal(s.instance);

    const first = await api.reportFailure(s.key);
    expect(first, 'charged to the instance it came through').to.include({ session: s.key, instance: s.instance, kind: 'other', scored: true, moved: true });
    expect(first.exit_note === '', 'a note exactly when the new exit may be a recent one').to.equal(first.new_exit);
    const movedTo = await api.session(s.key);
    expect(movedTo.instance, 'the report moved its own session').to.not.equal(s.instance);
    expect(await exitIpOf(suite.svc, s.key), 'its next request leaves through the exit the answer named').to.equal(first.exit_ip);
    expect((await api.instance(s.instance)).health.failure_score).to.equal(1);
    await api.action(s.instance, 'release');

    // Each report moves its session: the next ones come from other sessions on the same instance.
    const reportFrom = async (prefix: string, body: unknown): Promise<FailureResult> => {
      const key = await sessionOn(s.instance, prefix);
      const r = await api.reportFailure(key, body);
      expect(r.instance, `${prefix}: charged to the instance it came through`).to.equal(s.instance);
      return r;
    };
    const challenge = await reportFrom('challenge', { reason: 'challenge' });
    expect(challenge.kind, 'typed from reason').to.equal('captcha');
    const afterChallenge = (await api.instance(s.instance)).health;
    expect(afterChallenge.failure_score).to.be.within(1.5, QUARANTINE_SCORE - 0.01);
    expect(afterChallenge.failures_by_kind).to.deep.equal({ captcha: 1 });
    expect(afterChallenge.client_failures).to.equal(1);
    const logged = (await api.events(20)).find((e) => e.session === challenge.session && e.details.reason === 'challenge');
    expect(logged, 'the reason is kept in the audit log').to.not.equal(undefined);
    await api.action(s.instance, 'release');

    expect((await reportFrom('limited', { reason: '429' })).kind).to.equal('rate_limited');
    expect((await reportFrom('forbidden', { reason: 'HTTP 403' })).kind).to.equal('blocked');
    expect((await reportFrom('odd', { kind: 'something odd' })).kind, 'unrecognised text is other, not refused').to.equal('other');
    const mixed = (await api.instance(s.instance)).health;
    expect(mixed.failures_by_kind).to.deep.equal({ rate_limited: 1, blocked: 1, other: 1 });
    expect(mixed.state).to.equal('degraded');
    const released = await api.action(s.instance, 'release');
    expect(released.health).to.include({ state: 'healthy', failure_score: 0, failures_in_window: 0, client_failures: 0 });
    expect(released.health.failures_by_kind).to.deep.equal({});
  });

  it('counts a failure to a private destination but never scores it', async () => {
    const s = await placeSession('private');
    const before = await api.instance(s.instance);
    const r = await curlSocks(suite.svc.socksPort, s.key, TEST_PROXY_TOKEN, 'http://10.0.0.1/', ['--connect-timeout', '20']);
    expect(r.code, 'the network refuses a private destination').to.not.equal(0);
    const after = await pollUntil(
      'the failed request accounted',
      () => api.instance(s.instance),
      15_000,
      { until: (v) => v.totals.failures > before.totals.failures },
    );
    expect(after.health.failure_score).to.equal(before.health.failure_score);
    expect(after.health.failures_in_window).to.equal(before.health.failures_in_window);
    expect(after.health.transport_failures).to.equal(before.health.transport_failures);
    expect(after.health.state).to.equal(before.health.state);
    expect((await api.session(s.key)).failures).to.be.at.least(1);
  });

  it('never quarantines on a stream of 429 reports', async () => {
    const first = await placeSession('ratelimit');
    const instance = first.instance;
    suite.svc.net.whoami.setBehaviour(first.ip, 'rate_limited');
    let sawLimit = 0;
    let key = first.key;
    for (let i = 0; i < 30; i++) {
      // Each report moves its session off the instance: the next report comes from a new session
      // there. A request every few reports keeps the scenario honest without 30 fetches of a 429.
      if (i > 0) key = await sessionOn(instance, `ratelimit-${i}`);
      if (i % 5 === 0) {
        const got = await fetchThroughSession(suite.svc, key);
        if (got.kind === 'status' && got.status === 429) sawLimit++;
      }
      const r = await api.reportFailure(key, { kind: 'rate_limited' });
      expect(r.kind).to.equal('rate_limited');
      expect(r.instance, 'charged to the instance it came through').to.equal(instance);
      const h = (await api.instance(instance)).health;
      expect(OUT_OF_SERVICE, `after ${i + 1} rate limits`).to.not.include(h.state);
    }
    expect(sawLimit, 'the destination rate-limited the exit').to.be.at.least(5);
    const h = (await api.instance(instance)).health;
    expect(h.failures_by_kind.rate_limited).to.equal(30);
    expect(h.consecutive_failures, 'rate limits never count as consecutive').to.equal(0);
    expect(h.failure_score).to.be.at.most(QUARANTINE_SCORE / 2);
    expect(h.state).to.equal('degraded');
    expect((await api.pool()).routable).to.equal(3);
    await api.action(instance, 'release');
  });

  it("quarantines an exit the destination answers with a captcha on two clients' reports: each reporter moves at once, then everyone else; one party makes it suspect, not banned", async () => {
    await settled();
    const alice = await api.issueProxyToken('alice');
    const bob = await api.issueProxyToken('bob');
    // Sessions spread evenly. Pick an instance where alice has two sessions on one exit and another
    // instance on a different exit, so "another exit" is possible. tor often gives several clients
    // the same exit: when every instance shares one, rotate one and look again.
    const keys: string[] = [];
    for (let i = 0; i < 9; i++) {
      const key = `alice-${++keySeq}`;
      await exitIpOf(suite.svc, key, alice);
      keys.push(key);
    }
    let target: { instance: number; ip: string; keys: string[]; sharedWith: number[] } | undefined;
    const selection: string[] = [];
    for (let attempt = 0; attempt < 4 && !target; attempt++) {
      const seen = new Map<number, Map<string, string[]>>();
      for (const key of keys) {
        const ip = await exitIpOf(suite.svc, key, alice);
        const at = (await api.session(key)).instance;
        const byIp = seen.get(at) ?? new Map<string, string[]>();
        byIp.set(ip, [...(byIp.get(ip) ?? []), key]);
        seen.set(at, byIp);
      }
      const views = await api.instances();
      selection.push([...seen].map(([i, byIp]) => `${i}: ${[...byIp].map(([ip, k]) => `${ip}×${k.length}`).join(' ')}`).join(', '));
      const exitsOf = (v: InstanceView): Set<string> => new Set([v.exit_ip, ...(seen.get(v.id)?.keys() ?? [])].filter((x) => x !== ''));
      for (const [instance, byIp] of seen) {
        if (byIp.size !== 1 || target) continue;
        const [[ip, onIt]] = [...byIp] as [[string, string[]]];
        const others = views.filter((v) => v.id !== instance);
        const sharedWith = others.filter((v) => exitsOf(v).has(ip)).map((v) => v.id);
        const elsewhere = others.filter((v) => !exitsOf(v).has(ip));
        if (onIt.length >= 2 && elsewhere.length > 0) target = { instance, ip, keys: onIt, sharedWith };
      }
      if (!target) {
        const collide = views.find((v) => v.sessions > 0) as InstanceView;
        await api.action(collide.id, 'rotate');
        selection.push(`rotated ${collide.id}`);
        await settled();
      }
    }
    if (!target) throw new Error(`no instance with a second exit elsewhere after 4 tries: ${selection.join('; ')}`);
    const { instance, ip: burntIp } = target;
    const bobKey = await sessionOn(instance, 'bob', bob);
    // A session whose client never reports: only the quarantine moves it.
    const bystander = await sessionOn(instance, 'bystander');
    // A rotated instance forgives failures for a while after its rotation: start past that.
    if (selection.some((step) => step.startsWith('rotated'))) await new Promise((r) => setTimeout(r, ROTATION_GRACE_MS + 1000));
    const fingerprint = (await api.instance(instance)).assigned_exit?.fingerprint as string;
    suite.svc.net.whoami.setBehaviour(burntIp, 'captcha');
    const trail: string[] = [`instance ${instance} burnt ${burntIp} alice ${target.keys.join(',')} bob ${bobKey} bystander ${bystander} (${selection.join('; ')})`];

    // Alice sees the captcha and reports it: her sessions through that exit move at once.
    const [aliceFirst, ...aliceOthers] = target.keys as [string, ...string[]];
    expect(await fetchThroughSession(suite.svc, aliceFirst, suite.svc.whoamiUrl, alice)).to.deep.equal({ kind: 'captcha' });
    const firstReportAt = Date.now();
    const aliceReport = await api.reportFailure(aliceFirst, { kind: 'captcha', reason: 'captcha page' }, alice);
    expect(aliceReport, 'charged to the instance it came through').to.include({ session: aliceFirst, instance, kind: 'captcha', scored: true, moved: true });
    const afterAlice = (await api.instance(instance)).health;
    trail.push(`alice's report: ${afterAlice.state} score ${afterAlice.failure_score}`);
    expect(OUT_OF_SERVICE, 'one captcha does not quarantine').to.not.include(afterAlice.state);
    const next = await fetchThroughSession(suite.svc, aliceFirst, suite.svc.whoamiUrl, alice);
    const firstNewExitAt = Date.now();
    expect(next, `${aliceFirst}: its next request leaves through another exit`).to.deep.equal({ kind: 'ip', ip: aliceReport.exit_ip });
    expect(aliceReport.exit_ip).to.not.equal(burntIp);
    for (const key of aliceOthers) {
      expect((await api.session(key)).instance, `${key}: moved along with the reported session`).to.not.equal(instance);
      const got = await fetchThroughSession(suite.svc, key, suite.svc.whoamiUrl, alice);
      expect(got.kind, key).to.equal('ip');
      expect((got as { ip: string }).ip, key).to.not.equal(burntIp);
    }
    expect((await api.session(bobKey)).instance, "another client's session stays").to.equal(instance);

    // Bob sees it too: the second captcha quarantines the instance, and its other sessions move.
    expect(await fetchThroughSession(suite.svc, bobKey, suite.svc.whoamiUrl, bob)).to.deep.equal({ kind: 'captcha' });
    const bobReport = await api.reportFailure(bobKey, { kind: 'captcha' }, bob);
    expect(bobReport).to.include({ session: bobKey, instance, kind: 'captcha', scored: true, moved: true });
    const afterBob = (await api.instance(instance)).health;
    const quarantinedAt = Date.now();
    trail.push(`bob's report: ${afterBob.state} score ${afterBob.failure_score} remediations ${afterBob.remediations}`);
    // A fast new-circuit rung can already be done: remediations counts a quarantine whose ladder began.
    expect(OUT_OF_SERVICE.includes(afterBob.state) || afterBob.remediations > 0, `quarantined on the second report:\n${trail.join('\n')}`).to.equal(true);
    const moved = await api.session(bystander);
    expect(moved.instance, 'the bystander moved').to.not.equal(instance);
    // Another instance on the same exit relay would hand it the same burnt address.
    expect(target.sharedWith, 'moved onto an instance sharing the burnt exit').to.not.include(moved.instance);
    const bystanderNext = await fetchThroughSession(suite.svc, bystander);
    expect(bystanderNext.kind).to.equal('ip');
    expect((bystanderNext as { ip: string }).ip).to.not.equal(burntIp);

    const v = await api.instance(instance);
    expect(v.health.client_failures).to.be.at.least(2);
    expect(v.health.failures_by_kind.captcha ?? 0).to.be.at.least(2);
    const events = await api.events(300);
    const quarantine = events.find((e) => e.type === 'quarantine' && e.instance === instance);
    expect(quarantine, 'quarantine audit event').to.not.equal(undefined);
    expect(quarantine?.details.kind, 'quarantined by the captcha reports').to.equal('captcha');
    const assignments = events.filter((e) => e.type === 'assignment' && e.details.from === instance && e.details.to !== instance);
    const scenario = new Set([...target.keys, bobKey, bystander]);
    const movedFor = (reason: string): unknown[] => assignments.filter((e) => e.details.reason === reason && scenario.has(e.session as string)).map((e) => e.session);
    expect(movedFor('report'), "alice's report: her sessions through the exit").to.have.members(target.keys);
    // Bob's report quarantined the instance: the quarantine moved everyone left, bob included.
    expect(movedFor('quarantine')).to.have.members([bobKey, bystander]);
    // alice and bob are tokens without an owner: both the operator's, one party. Its word makes the
    // exit suspect (chosen last), never banned for everyone.
    expect(events.some((e) => e.type === 'exit' && e.details.reason === 'suspect' && e.details.fingerprint === fingerprint), 'the exit is suspect').to.equal(true);
    const exits = await api.json<{ bans: { fingerprint: string }[] }>('/api/exits');
    expect(exits.bans.map((b) => b.fingerprint), 'one party bans nothing').to.not.include(fingerprint);

    console.log(
      `      [e2eheal] captcha scenario (burnt exit ${target.sharedWith.length > 0 ? `shared with instance ${target.sharedWith.join(',')}` : 'unique'}): ` +
        `first report → next request through a new exit ${firstNewExitAt - firstReportAt} ms, first report → quarantine ${quarantinedAt - firstReportAt} ms`,
    );
    burnt = { instance, ip: burntIp, quarantinedAt };
  });

  it('remediates the quarantined instance onto a new exit; it passes probation and returns to healthy', async () => {
    if (!burnt) throw new Error('needs the captcha scenario above');
    const { instance, ip: burntIp } = burnt;
    suite.svc.net.whoami.setBehaviour(burntIp, 'captcha'); // still burnt: only a new exit gets through
    const deadline = Date.now() + 240_000;
    let cleanIp: string | undefined;
    let rungs: string[] = [];
    const trail: string[] = [];
    while (!cleanIp) {
      if (Date.now() > deadline) throw new Error(`no clean exit in time:\n${trail.join('\n')}`);
      const back = await pollUntil(
        'the instance back in service after a remediation',
        () => api.instance(instance),
        Math.max(1000, deadline - Date.now()),
        { until: (v) => !OUT_OF_SERVICE.includes(v.health.state) && v.ready && v.exit_ip !== '', intervalMs: 200 },
      );
      if (back.health.state === 'probation') rungs.push(back.health.remediation_rung);
      expect(back.health.remediations).to.be.at.least(1);
      // A new key lands on the emptiest instance: the one just back (its sessions were moved off).
      const key = `probation-${++keySeq}`;
      const got = await fetchThroughSession(suite.svc, key);
      const at = (await api.session(key)).instance;
      trail.push(`${back.health.state}/${back.health.remediation_rung} exit ${back.exit_ip}: ${key} on ${at} got ${JSON.stringify(got)}`);
      if (at !== instance) {
        // It went elsewhere: the instance may be on its way out again; look once more shortly.
        await new Promise((r) => setTimeout(r, 500));
        continue;
      }
      if (got.kind === 'ip' && got.ip !== burntIp) {
        cleanIp = got.ip;
        break;
      }
      // tor picked the burnt exit again: the client reports, and the ladder climbs a rung.
      if (got.kind === 'captcha') trail.push(`  report → ${JSON.stringify(await api.reportFailure(key, { kind: 'captcha' }))}`);
      await new Promise((r) => setTimeout(r, 1000));
    }
    rungs = [...new Set(rungs)];
    const healthy = await pollUntil('healthy after a request survived probation', () => api.instance(instance), 20_000, { until: (v) => v.health.state === 'healthy' });
    expect(healthy.exit_ip, 'remediated onto a new exit').to.not.equal(burntIp);
    expect(cleanIp).to.not.equal(burntIp);
    const remediation = (await api.events(500)).filter((e) => e.type === 'remediation' && e.instance === instance);
    expect(remediation.length, 'remediation audit events').to.be.greaterThan(0);
    expect(remediation.map((e) => e.message).join('\n')).to.match(/new_circuit|new circuit/);
    console.log(
      `      [e2eheal] remediation: quarantine → healthy on a new exit ${Date.now() - burnt.quarantinedAt} ms; ` +
        `rungs on probation: ${rungs.join(', ') || 'none observed'}; new exit ${cleanIp}; ${trail.length} probe(s) through it`,
    );
  });
});
