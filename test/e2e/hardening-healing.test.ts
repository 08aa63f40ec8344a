/**
 * Issue 14, findings 1 and 6 on the private network: self-healing sees events in the order they
 * happened, and one proxy token cannot take the pool out of service.
 */
import { expect } from 'chai';
import { HealApi } from '../support/e2e-heal-api.js';
import { fetchThroughSession } from '../support/e2e-heal-client.js';
import { pollUntil } from '../support/e2e-heal-poll.js';
import { startService, type RunningService } from '../support/service-fixture.js';

const POOL_SIZE = 3;
const CONSECUTIVE = 3;
const ROUNDS = 6;

describe("hardening: the scraper's loop (request, report at once) keeps its consecutive count (6)", function () {
  this.timeout(360_000);
  let svc: RunningService;
  let api: HealApi;

  before(async () => {
    svc = await startService({
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
    });
    await svc.waitReady(POOL_SIZE, 120_000);
    api = await HealApi.signIn(svc);
  });
  after(async () => {
    expect(await svc?.stop()).to.equal(0);
  });

  it(`quarantines on the ${CONSECUTIVE}rd report of a request-then-report loop, ${ROUNDS} times in a row`, async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const key = `loop-${round}`;
      let instance = -1;
      for (let i = 1; i <= CONSECUTIVE; i++) {
        // The request reaches the destination (the proxy sees a success: the block page is inside
        // the response), and the scraper reports it at once, before the worker's accounting batch.
        const got = await fetchThroughSession(svc, key);
        expect(got.kind, `round ${round}, request ${i}`).to.equal('ip');
        const report = await api.reportFailure(key, { kind: 'blocked', reason: `round ${round} #${i}` });
        instance = report.instance;
        if (i < CONSECUTIVE) {
          // Let the request's success arrive: it ended before the report and must not reset the run.
          await pollUntil('the request accounted', () => api.session(key), (v) => v.requests === i, 10_000);
          const after = await api.instance(instance);
          expect(after.health.consecutive_failures, `round ${round}: after report ${i} and its request's success arrived`).to.equal(i);
        }
      }
      const burnt = await pollUntil('quarantined', () => api.instance(instance), (v) => ['quarantined', 'remediating'].includes(v.health.state), 5_000);
      expect(burnt.health.state, `round ${round}`).to.be.oneOf(['quarantined', 'remediating']);
      // Back in service for the next round (release clears the window and the run).
      await api.action(instance, 'release');
      await pollUntil('all routable', () => api.pool(), (p) => p.routable === POOL_SIZE, 60_000);
    }
  });
});
