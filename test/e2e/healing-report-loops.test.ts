/**
 * Issue 14, findings 1 and 6 on the private network: self-healing sees events in the order they
 * happened, and one proxy token cannot take the pool out of service.
 */
import { expect } from 'chai';
import type { AuditEvent } from '../../shared/api/audit-event.js';
import { HealApi } from '../support/clients/api-client.js';
import { fetchThroughSession } from '../support/clients/session-fetch.js';
import { pollUntil } from '../support/waiting.js';
import { startService, type RunningService, withService } from '../support/fixtures/service.js';

const POOL_SIZE = 3;
const CONSECUTIVE = 3;
const ROUNDS = 4;

describe("healing: the scraper's loop (request, report at once) keeps its consecutive count", function () {
  this.timeout(360_000);
  let api: HealApi;

  const suite = withService({
      POOL_SIZE: String(POOL_SIZE),
      QUARANTINE_CONSECUTIVE: String(CONSECUTIVE),
      // So high that only the consecutive rule can quarantine.
      QUARANTINE_FAILURES: '100',
      FAILURE_WINDOW: '10m',
      REMEDIATION_BACKOFF_BASE: '1m',
      // A quarantine starts with a new circuit, and failures right after a rotation are not
      // scored for ROTATION_GRACE: the next round may land on the instance just released.
      ROTATION_GRACE: '0s',
      CLIENT_REPORT_BUDGET: '1000/1m',
    }, { ready: POOL_SIZE, readyTimeoutMs: 120_000 });
  before(async () => {
    api = await HealApi.signIn(suite.svc);
  });

  it(`quarantines on the ${CONSECUTIVE}rd report of request-then-report loops, ${ROUNDS} times in a row`, async () => {
    // A report moves its own session (and its credential's other sessions through that exit):
    // three clients, each with a session on the instance, make one request each and report it.
    const tokens: string[] = [];
    for (let i = 1; i <= CONSECUTIVE; i++) tokens.push(await api.issueProxyToken(`scraper-${i}`));
    let seq = 0;
    for (let round = 0; round < ROUNDS; round++) {
      // The first client's new session goes to the least loaded instance; the others join it there.
      const first = `loop-${round}-${++seq}`;
      expect((await fetchThroughSession(suite.svc, first, suite.svc.whoamiUrl, tokens[0])).kind).to.equal('ip');
      const instance = (await api.session(first)).instance;
      const keys = [first];
      for (const token of tokens.slice(1)) {
        for (let attempt = 0; ; attempt++) {
          if (attempt === 20) throw new Error(`round ${round}: no session of the next client landed on instance ${instance}`);
          const key = `loop-${round}-${++seq}`;
          expect((await fetchThroughSession(suite.svc, key, suite.svc.whoamiUrl, token)).kind).to.equal('ip');
          if ((await api.session(key)).instance === instance) {
            keys.push(key);
            break;
          }
        }
      }
      // Every placement's success accounted before the loop starts.
      for (const key of keys) await pollUntil('the placement accounted', () => api.session(key), 10_000, { until: (v) => v.requests === 1 });
      for (let i = 1; i <= CONSECUTIVE; i++) {
        const key = keys[i - 1] as string;
        const token = tokens[i - 1] as string;
        // The request reaches the destination (the proxy sees a success: the block page is inside
        // the response), and the scraper reports it at once, before the worker's accounting batch.
        const got = await fetchThroughSession(suite.svc, key, suite.svc.whoamiUrl, token);
        expect(got.kind, `round ${round}, request ${i}`).to.equal('ip');
        const report = await api.reportFailure(key, { kind: 'blocked', reason: `round ${round} #${i}` }, token);
        expect(report.instance, `round ${round}, report ${i}: charged to the instance it came through`).to.equal(instance);
        expect(report.moved, `round ${round}, report ${i}: the reporter moved`).to.equal(true);
        if (i < CONSECUTIVE) {
          // Let the request's success arrive: it ended before the report and must not reset the run.
          await pollUntil('the request accounted', () => api.session(key), 10_000, { until: (v) => v.requests === 2 });
          const after = await api.instance(instance);
          expect(after.health.consecutive_failures, `round ${round}: after report ${i} and its request's success arrived`).to.equal(i);
        }
      }
      const burnt = await pollUntil('quarantined', () => api.instance(instance), 5_000, { until: (v) => ['quarantined', 'remediating'].includes(v.health.state) });
      expect(burnt.health.state, `round ${round}`).to.be.oneOf(['quarantined', 'remediating']);
      // Back in service for the next round (release clears the window and the run).
      await api.action(instance, 'release');
      await pollUntil('all routable', () => api.pool(), 60_000, { until: (p) => p.routable === POOL_SIZE });
    }
  });
});

describe('healing: one proxy token cannot take the pool out of service', function () {
  this.timeout(360_000);
  const SIZE = 4;
  const KEYS = Array.from({ length: 12 }, (_, i) => `fleet-${i}`);
  let svc: RunningService;
  let api: HealApi;

  before(async () => {
    // Defaults for the guards: MIN_ROUTABLE 25% (1 of 4), CLIENT_REPORT_BUDGET 30/1m.
    svc = await startService({ POOL_SIZE: String(SIZE), REMEDIATION_BACKOFF_BASE: '10m' });
    await svc.waitReady(SIZE, 120_000);
    api = await HealApi.signIn(svc);
  });
  after(async () => {
    expect(await svc?.stop()).to.equal(0);
  });

  async function releaseAll(): Promise<void> {
    for (const i of await api.instances()) if (['quarantined', 'remediating'].includes(i.health.state)) await api.action(i.id, 'release');
    await pollUntil('all routable', () => api.pool(), 60_000, { until: (p) => p.routable === SIZE });
  }

  it("a report loop over a dozen sessions leaves the floor in service, scores only the token's budget, and rebalances on release", async () => {
    for (const key of KEYS) expect((await fetchThroughSession(svc, key)).kind, key).to.equal('ip');
    const scored: boolean[] = [];
    let leastRoutable = SIZE;
    for (let round = 0; round < 3; round++) {
      for (const key of KEYS) {
        scored.push((await api.reportFailure(key, { kind: 'captcha' })).scored);
        leastRoutable = Math.min(leastRoutable, (await api.pool()).routable);
      }
    }
    expect(leastRoutable, 'routable instances never fell below MIN_ROUTABLE').to.be.at.least(1);
    expect(scored.slice(0, 30).every(Boolean), 'the first 30 reports are scored').to.equal(true);
    expect(scored.slice(30).some(Boolean), 'reports over the budget are not').to.equal(false);
    const events = await api.events(200);
    expect(events.filter((e) => e.message.includes('not scored: over CLIENT_REPORT_BUDGET'))).to.have.length(scored.length - 30);
    // Clients are still served.
    expect((await fetchThroughSession(svc, 'bystander')).kind).to.equal('ip');

    // The sessions piled onto what stayed in service spread again once the others come back.
    const sessionsAfterEpisode = await api.sessions();
    const piled = Math.max(...countByInstance(sessionsAfterEpisode));
    if (piled <= Math.ceil((KEYS.length + 1) / SIZE)) {
      // Seen once in CI (not reproduced alone): say where the sessions were and what the pool did.
      const states = (await api.instances()).map((i) => `${i.id}: ${i.health.state}`);
      const where = sessionsAfterEpisode.map((x) => `${x.key}@${x.instance}`);
      expect.fail(`the episode piled sessions up: ${JSON.stringify(where)}; instances ${JSON.stringify(states)}; newest events ${JSON.stringify(await api.trail())}`);
    }
    await releaseAll();
    // Spread to the share, unless the never-back rule forbids it: a session a quarantine moved
    // off an instance never returns there (its exit was reported burnt), and sessions their
    // clients placed are never moved. Which sessions fled where is in the audit log.
    const share = Math.ceil((KEYS.length + 1) / SIZE);
    const settledSpread = await pollUntil(
      'sessions rebalanced as far as the never-back rule allows',
      async () => {
        const sessions = await api.sessions();
        const counts = new Map<number, number>();
        for (const id of (await api.instances()).map((i) => i.id)) counts.set(id, 0);
        for (const x of sessions) counts.set(x.instance, (counts.get(x.instance) ?? 0) + 1);
        const marks = displacementMarks(await api.json<AuditEvent[]>('/api/events?type=assignment&limit=1000'));
        const under = [...counts].filter(([, n]) => n < share).map(([id]) => id);
        const mayMoveTo = (key: string, to: number): boolean => {
          const mark = marks.get(key);
          return mark !== undefined && mark.burntFrom !== to;
        };
        const movable = sessions.filter((x) => (counts.get(x.instance) ?? 0) > share && under.some((u) => mayMoveTo(x.key, u)));
        return { max: Math.max(...counts.values()), movable: movable.length, counts: [...counts.values()] };
      },
      15_000,
      { until: (r) => r.max <= share || r.movable === 0 },
    );
    expect(settledSpread.max <= share || settledSpread.movable === 0, JSON.stringify(settledSpread)).to.equal(true);
  });

  it('requests to closed ports from one client never take the pool below the floor', async () => {
    await releaseAll();
    const closedPort = `http://whoami.testnet:1/`;
    let leastRoutable = SIZE;
    for (let i = 0; i < 24; i++) {
      const got = await fetchThroughSession(svc, `closed-${i % 6}`, closedPort);
      expect(got.kind).to.not.equal('ip');
      leastRoutable = Math.min(leastRoutable, (await api.pool()).routable);
    }
    expect(leastRoutable).to.be.at.least(1);
    expect((await fetchThroughSession(svc, 'bystander-2')).kind).to.equal('ip');
  });
});

/**
 * Per session the pool moved for its own reasons (its last move other than a rebalance, which
 * keeps the mark): such a session may be rebalanced, never back onto the instance a quarantine
 * moved it off. Sessions their clients placed have no mark and are never moved.
 */
function displacementMarks(newestFirst: AuditEvent[]): Map<string, { burntFrom?: number }> {
  const marks = new Map<string, { burntFrom?: number }>();
  const decided = new Set<string>();
  for (const e of newestFirst) {
    const key = e.session;
    if (key === null || decided.has(key)) continue;
    const reason = e.details.reason;
    if (reason === 'rebalance') continue;
    decided.add(key);
    if (reason === 'quarantine' && typeof e.details.from === 'number') marks.set(key, { burntFrom: e.details.from });
    else if (reason === 'unroutable' || reason === 'drain' || reason === 'retired') marks.set(key, {});
  }
  return marks;
}

function countByInstance(sessions: { instance: number }[]): number[] {
  const counts = new Map<number, number>();
  for (const s of sessions) counts.set(s.instance, (counts.get(s.instance) ?? 0) + 1);
  return [...counts.values()];
}
