import { expect } from 'chai';
import {
  RUNG_RETRY_DELAY_MS,
  RemediationLadder,
  restartBackoffDelay,
  type LadderConfig,
  type RemediationPlan,
} from '../../supervisor/health/remediation-ladder.js';

const MIN = 60_000;
const CONFIG: LadderConfig = { remediationBackoffBaseMs: 30_000, remediationBackoffMaxMs: 10 * MIN, remediationRecurrenceWindowMs: 30 * MIN };

/** One remediation that works: quarantine at `at`, the rung completes a second later. */
function remediate(ladder: RemediationLadder, at: number): { ladder: RemediationLadder; plan: RemediationPlan } {
  const begun = ladder.begin(at, CONFIG);
  return { ladder: begun.ladder.runBegun().ladder.completed(at + 1000), plan: begun.plan };
}

const brief = (p: RemediationPlan): [string, number, number] => [p.rung, p.attempt, p.delayMs];

describe('health: remediation ladder', () => {
  it('starts at the new-circuit rung with no delay and shows none while idle', () => {
    const idle = RemediationLadder.idle();
    expect(idle.rungName).to.equal('none');
    const { ladder, plan } = idle.begin(0, CONFIG);
    expect(plan).to.deep.equal({ rung: 'new_circuit', attempt: 1, delayMs: 0, cause: 'first' });
    expect(ladder.rungName).to.equal('new_circuit');
    expect(ladder.completed(10).rungName).to.equal('none');
  });

  it('climbs one rung per recurrence, then doubles the backoff of the last rung up to its ceiling', () => {
    let ladder = RemediationLadder.idle();
    const plans: [string, number, number][] = [];
    for (let i = 0; i < 9; i++) {
      const r = remediate(ladder, i * 10 * MIN);
      ladder = r.ladder;
      plans.push(brief(r.plan));
    }
    expect(plans).to.deep.equal([
      ['new_circuit', 1, 0],
      ['wipe_restart', 1, 0],
      ['restart_backoff', 1, 30_000],
      ['restart_backoff', 2, 60_000],
      ['restart_backoff', 3, 120_000],
      ['restart_backoff', 4, 240_000],
      ['restart_backoff', 5, 480_000],
      ['restart_backoff', 6, 600_000],
      ['restart_backoff', 7, 600_000],
    ]);
  });

  it('restarts at the cheapest rung after a quiet period longer than the recurrence window', () => {
    let ladder = RemediationLadder.idle();
    for (let i = 0; i < 5; i++) ladder = remediate(ladder, i * MIN).ladder;
    expect([ladder.rung, ladder.attemptsAtRung]).to.deep.equal(['restart_backoff', 3]);
    const lastDone = 4 * MIN + 1000;
    const after = ladder.begin(lastDone + 30 * MIN + 1, CONFIG);
    expect(brief(after.plan)).to.deep.equal(['new_circuit', 1, 0]);
    expect(after.plan.cause).to.equal('first');
    // Back up the ladder, the backoff starts again from the base: attempts are per rung, not lifetime.
    let l = after.ladder.runBegun().ladder.completed(lastDone + 31 * MIN);
    l = remediate(l, lastDone + 32 * MIN).ladder;
    const again = l.begin(lastDone + 33 * MIN, CONFIG);
    expect(brief(again.plan)).to.deep.equal(['restart_backoff', 1, 30_000]);
  });

  it('counts a quarantine exactly at the end of the recurrence window as recurrence', () => {
    const { ladder } = remediate(RemediationLadder.idle(), 0);
    expect(ladder.begin(1000 + 30 * MIN, CONFIG).plan.rung).to.equal('wipe_restart');
    expect(ladder.begin(1000 + 30 * MIN + 1, CONFIG).plan.rung).to.equal('new_circuit');
  });

  it('retries a failed cheap rung once, then climbs; the last rung retries with growing backoff', () => {
    let { ladder } = RemediationLadder.idle().begin(0, CONFIG);
    const plans: [string, number, number, string][] = [];
    for (let i = 0; i < 7; i++) {
      const r = ladder.failed(CONFIG);
      ladder = r.ladder;
      plans.push([...brief(r.plan), r.plan.cause]);
    }
    expect(plans).to.deep.equal([
      ['new_circuit', 2, RUNG_RETRY_DELAY_MS, 'retry'],
      ['wipe_restart', 1, 0, 'escalation'],
      ['wipe_restart', 2, RUNG_RETRY_DELAY_MS, 'retry'],
      ['restart_backoff', 1, 30_000, 'escalation'],
      ['restart_backoff', 2, 60_000, 'retry'],
      ['restart_backoff', 3, 120_000, 'retry'],
      ['restart_backoff', 4, 240_000, 'retry'],
    ]);
    expect(ladder.active).to.equal(true);
  });

  it('counts a remediation once however many runs it takes', () => {
    let { ladder } = RemediationLadder.idle().begin(0, CONFIG);
    const first = ladder.runBegun();
    expect(first.first).to.equal(true);
    ladder = first.ladder.failed(CONFIG).ladder;
    expect(ladder.runBegun().first).to.equal(false);
  });

  it('forgets everything on reset (release)', () => {
    const { ladder } = remediate(remediate(RemediationLadder.idle(), 0).ladder, MIN);
    expect(ladder.rung).to.equal('wipe_restart');
    const reset = ladder.reset();
    expect(reset.rungName).to.equal('none');
    expect(reset.begin(2 * MIN, CONFIG).plan.rung).to.equal('new_circuit');
  });

  const backoff: [number, number][] = [
    [1, 30_000],
    [2, 60_000],
    [3, 120_000],
    [5, 480_000],
    [6, 600_000],
    [60, 600_000],
    [10_000, 600_000],
  ];
  for (const [attempt, ms] of backoff) {
    it(`backs off ${ms} ms at attempt ${attempt} of the last rung`, () => expect(restartBackoffDelay(attempt, CONFIG)).to.equal(ms));
  }
});
