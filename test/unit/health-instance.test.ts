import { expect } from 'chai';
import type { HealthState } from '../../shared/api/views.js';
import type { HealthTracker } from '../../supervisor/health/health-tracker.js';
import { InstanceHealth, type InstanceHealthConfig, type InstanceHealthOptions } from '../../supervisor/health/instance-health.js';
import { ManualClock } from '../support/fakes/manual-clock.js';
import { RUNG_RETRY_DELAY_MS } from '../../supervisor/health/remediation-ladder.js';
import { quietLogger } from '../support/fakes/quiet-logger.js';
import { ScriptedActions } from './health-executor.test.js';

const SEC = 1000;
const MIN = 60 * SEC;
const CONFIG: InstanceHealthConfig = {
  quarantineFailures: 5,
  quarantineConsecutive: 3,
  failureWindowMs: 5 * MIN,
  rotationGraceMs: 5 * SEC,
  remediationBackoffBaseMs: 30 * SEC,
  remediationBackoffMaxMs: 10 * MIN,
  remediationRecurrenceWindowMs: 30 * MIN,
  bootstrapStallTimeoutMs: 2 * MIN,
};
const READY_TIMEOUT = 4 * MIN;

interface Rig {
  h: InstanceHealth;
  clock: ManualClock;
  actions: ScriptedActions;
  audits: string[];
  quarantines: string[];
  states: HealthState[];
}

function rig(options: Partial<InstanceHealthOptions> = {}, listeners: { throwing?: boolean } = {}): Rig {
  const clock = new ManualClock(10 * SEC);
  const actions = new ScriptedActions(clock);
  const audits: string[] = [];
  const quarantines: string[] = [];
  const states: HealthState[] = [];
  const h = new InstanceHealth({
    id: 3,
    config: CONFIG,
    actions,
    clock,
    log: quietLogger(),
    ...options,
  });
  if (listeners.throwing) {
    h.on('audit', () => {
      throw new Error('audit sink down');
    });
    h.on('quarantine', () => {
      throw new Error('pool busy');
    });
  } else {
    h.on('audit', (a) => audits.push(`${a.type}: ${a.message}`));
    h.on('quarantine', (cause) => quarantines.push(`${h.id}:${cause}`));
    h.on('state', (c) => states.push(c.to));
  }
  h.bootstrapped(clock.now());
  return { h, clock, actions, audits, quarantines, states };
}

function captchas(r: Rig, n: number): void {
  for (let i = 0; i < n; i++) r.h.failure('captcha', 'client', true, r.clock.now());
}

describe('health: instance health', () => {
  it('tells whether a failure would quarantine without changing anything, and settles one site’s complaints without a quarantine', () => {
    const r = rig();
    r.h.failure('captcha', 'client', true, r.clock.now(), { site: 'shop.example' });
    const before = r.h.view();
    // The second captcha in the window reaches QUARANTINE_FAILURES' weight for captchas.
    expect(r.h.wouldQuarantine('captcha', 'client', true, r.clock.now())).to.equal(true);
    expect(r.h.wouldQuarantine('captcha', 'client', false, r.clock.now()), 'an unscored failure').to.equal(false);
    expect(r.h.view()).to.deep.equal(before);
    expect(r.quarantines).to.deep.equal([]);
    r.h.failure('captcha', 'client', true, r.clock.now(), { mayQuarantine: false, site: 'shop.example' });
    expect(r.h.view().state).to.equal('degraded');
    r.h.settleSite('shop.example', r.clock.now());
    expect(r.h.view()).to.include({ state: 'healthy', failures_in_window: 0 });
    expect(r.h.wouldQuarantine('captcha', 'client', true, r.clock.now()), 'the window starts again').to.equal(false);
    expect(r.quarantines).to.deep.equal([]);
  });

  it('keeps everything but the settled site’s complaints: the pool’s own evidence and other sites stay', () => {
    const r = rig();
    r.h.failure('transport', 'transport', true, r.clock.now());
    r.h.failure('captcha', 'client', true, r.clock.now(), { mayQuarantine: false, site: 'shop.example' });
    r.h.failure('blocked', 'client', true, r.clock.now(), { mayQuarantine: false, site: 'news.example' });
    const before = r.h.view();
    r.h.settleSite('shop.example', r.clock.now());
    const after = r.h.view();
    expect(after.failures_in_window).to.equal(before.failures_in_window - 1);
    expect(after.consecutive_failures).to.equal(before.consecutive_failures - 1);
    expect(after.state).to.equal('degraded');
    r.h.settleSite('unknown.example', r.clock.now());
    expect(r.h.view()).to.deep.equal(after);
  });

  it('fits the pool’s HealthTracker interface', () => {
    const tracker: HealthTracker = rig().h;
    expect(tracker.routable()).to.equal(true);
  });

  it('goes quarantined -> remediating -> probation -> healthy, moving sessions once', async () => {
    const r = rig();
    captchas(r, 1);
    expect(r.h.view()).to.include({ state: 'degraded', failure_score: 2.5, quarantine_score: 5 });
    captchas(r, 1);
    expect(r.h.state).to.equal('quarantined');
    expect(r.h.routable()).to.equal(false);
    expect(r.quarantines).to.deep.equal(['3:score']);
    await r.clock.settle();
    expect(r.h.state).to.equal('probation');
    expect(r.h.routable()).to.equal(true);
    expect(r.actions.calls).to.deep.equal(['newCircuit@10000', `waitUntilReady(${READY_TIMEOUT})@10000`]);
    expect(r.h.view()).to.deep.include({ failures_in_window: 0, failure_score: 0, remediations: 1, remediation_rung: 'new_circuit', client_failures: 2, failures_by_kind: { captcha: 2 } });
    r.h.success(r.clock.now());
    expect(r.h.view()).to.include({ state: 'healthy', remediation_rung: 'none' });
    expect(r.states).to.deep.equal(['healthy', 'degraded', 'quarantined', 'remediating', 'probation', 'healthy']);
    expect(r.audits).to.have.length(4);
    expect(r.audits[0]).to.match(/^quarantine: instance 3 quarantined: failure score 5 reached 5/);
    expect(r.audits.slice(1).every((a) => a.startsWith('remediation: instance 3 '))).to.equal(true);
    expect(r.h.lifetime()).to.deep.equal({ transport: 0, client: 2, byKind: { captcha: 2 }, remediations: 1, unscored: 0 });
    expect(r.clock.pendingTimers).to.equal(0);
  });

  it('retries a failing rung once, then escalates, and ends on probation', async () => {
    const r = rig();
    r.actions.script.newCircuit.push('reject', 'reject');
    captchas(r, 2);
    await r.clock.settle();
    expect(r.h.state).to.equal('remediating');
    expect(r.h.view().remediation_rung).to.equal('new_circuit');
    await r.clock.advance(RUNG_RETRY_DELAY_MS);
    expect(r.h.state).to.equal('probation');
    expect(r.h.view().remediation_rung).to.equal('wipe_restart');
    expect(r.actions.calls).to.deep.equal([
      'newCircuit@10000',
      'newCircuit@15000',
      'wipeRestart@15000',
      `waitUntilReady(${READY_TIMEOUT})@15000`,
    ]);
    expect(r.audits.some((a) => /new_circuit failed .*retrying new_circuit \(attempt 2\)/.test(a))).to.equal(true);
    expect(r.audits.some((a) => /escalating to wipe_restart/.test(a))).to.equal(true);
    expect(r.h.view().remediations).to.equal(1);
  });

  it('escalates past a restart whose bootstrap stalls instead of staying in remediating', async () => {
    const r = rig();
    r.actions.script.newCircuit.push('reject', 'reject');
    // wipe_restart twice: the process starts but never bootstraps; then the backoff rung works.
    r.actions.script.waitUntilReady.push('hang', 'hang');
    captchas(r, 2);
    await r.clock.advance(RUNG_RETRY_DELAY_MS);
    expect(r.h.state).to.equal('remediating');
    expect(r.h.view().remediation_rung).to.equal('wipe_restart');
    await r.clock.advance(READY_TIMEOUT);
    expect(r.h.state).to.equal('remediating');
    await r.clock.advance(RUNG_RETRY_DELAY_MS + READY_TIMEOUT);
    expect(r.h.view().remediation_rung).to.equal('restart_backoff');
    expect(r.h.state).to.equal('remediating');
    await r.clock.advance(CONFIG.remediationBackoffBaseMs);
    expect(r.h.state).to.equal('probation');
    const started = 10 * SEC;
    const wipe1 = started + RUNG_RETRY_DELAY_MS;
    const wipe2 = wipe1 + READY_TIMEOUT + RUNG_RETRY_DELAY_MS;
    const backoff = wipe2 + READY_TIMEOUT + CONFIG.remediationBackoffBaseMs;
    expect(r.actions.calls.filter((c) => !c.startsWith('newCircuit'))).to.deep.equal([
      `wipeRestart@${wipe1}`,
      `waitUntilReady(${READY_TIMEOUT})@${wipe1}`,
      `wipeRestart@${wipe2}`,
      `waitUntilReady(${READY_TIMEOUT})@${wipe2}`,
      `restart@${backoff}`,
      `waitUntilReady(${READY_TIMEOUT})@${backoff}`,
    ]);
    expect(r.audits.some((a) => /not bootstrapped within/.test(a))).to.equal(true);
  });

  it('keeps retrying the last rung with a doubling backoff while it fails, never idle', async () => {
    const r = rig();
    r.actions.script.newCircuit.push('reject', 'reject');
    r.actions.script.wipeRestart.push('reject', 'reject');
    r.actions.script.restart.push('reject', 'reject', 'reject', 'reject');
    captchas(r, 2);
    await r.clock.settle();
    for (let i = 0; i < 40 && r.h.state !== 'probation'; i++) {
      expect(r.h.state).to.be.oneOf(['quarantined', 'remediating']);
      expect(r.clock.pendingTimers).to.be.at.least(1);
      const next = r.clock.nextTimerAt() as number;
      await r.clock.advance(next - r.clock.now());
    }
    expect(r.h.state).to.equal('probation');
    const restarts = r.actions.calls.filter((c) => c.startsWith('restart@')).map((c) => Number(c.split('@')[1]));
    const gaps = restarts.slice(1).map((t, i) => t - (restarts[i] as number));
    expect(gaps).to.deep.equal([60 * SEC, 120 * SEC, 240 * SEC, 480 * SEC]);
  });

  it('climbs on recurrence and starts again at the cheapest rung after a quiet period', async () => {
    const r = rig();
    const cycle = async (): Promise<void> => {
      expect(r.h.quarantine(r.clock.now())).to.equal(true);
      for (let i = 0; i < 5 && r.h.state !== 'probation'; i++) await r.clock.advance(r.clock.nextTimerAt() === null ? 0 : (r.clock.nextTimerAt() as number) - r.clock.now());
      expect(r.h.state).to.equal('probation');
      r.h.success(r.clock.now());
    };
    const rungs: string[] = [];
    await cycle();
    rungs.push(r.h.lifetime().remediations + ':' + r.actions.calls.at(-2));
    await r.clock.advance(MIN);
    await cycle();
    rungs.push(r.h.lifetime().remediations + ':' + r.actions.calls.at(-2));
    await r.clock.advance(31 * MIN);
    await cycle();
    rungs.push(r.h.lifetime().remediations + ':' + r.actions.calls.at(-2));
    expect(rungs.map((x) => x.replace(/@\d+$/, ''))).to.deep.equal(['1:newCircuit', '2:wipeRestart', '3:newCircuit']);
    expect(r.quarantines).to.deep.equal(['3:manual', '3:manual', '3:manual']);
  });

  it('release during the backoff wait cancels the rung and clears everything', async () => {
    const r = rig();
    r.actions.script.newCircuit.push('reject', 'reject');
    r.actions.script.wipeRestart.push('reject', 'reject');
    captchas(r, 2);
    await r.clock.advance(2 * RUNG_RETRY_DELAY_MS);
    expect(r.h.view().remediation_rung).to.equal('restart_backoff');
    expect(r.clock.pendingTimers).to.equal(1);
    r.h.release(r.clock.now());
    expect(r.h.view()).to.deep.include({ state: 'healthy', failure_score: 0, client_failures: 0, failures_by_kind: {}, remediation_rung: 'none' });
    expect(r.clock.pendingTimers).to.equal(0);
    const calls = r.actions.calls.length;
    await r.clock.advance(60 * MIN);
    expect(r.actions.calls).to.have.length(calls);
    expect(r.h.state).to.equal('healthy');
    expect(r.audits.at(-1)).to.match(/cancelled by release/);
  });

  it('release during a running rung ignores the rung’s late outcome', async () => {
    const r = rig();
    r.actions.script.newCircuit.push('hang');
    captchas(r, 2);
    await r.clock.settle();
    expect(r.h.state).to.equal('remediating');
    r.h.release(r.clock.now());
    expect(r.h.state).to.equal('healthy');
    r.actions.releaseHung();
    await r.clock.advance(MIN);
    expect(r.h.state).to.equal('healthy');
    expect(r.h.view().remediation_rung).to.equal('none');
  });

  it('stays in remediation through the instance’s own restart events', async () => {
    const r = rig();
    r.actions.script.waitUntilReady.push('hang');
    r.h.quarantine(r.clock.now());
    await r.clock.settle();
    r.h.unbootstrapped(r.clock.now());
    expect(r.h.state).to.equal('remediating');
    r.h.bootstrapped(r.clock.now());
    r.actions.releaseHung();
    await r.clock.settle();
    expect(r.h.state).to.equal('probation');
  });

  it('refuses a manual quarantine unless routable', async () => {
    const r = rig();
    r.h.unbootstrapped(r.clock.now());
    expect(r.h.quarantine(r.clock.now())).to.equal(false);
    r.h.bootstrapped(r.clock.now());
    r.actions.script.newCircuit.push('hang');
    expect(r.h.quarantine(r.clock.now())).to.equal(true);
    expect(r.h.quarantine(r.clock.now())).to.equal(false);
    await r.clock.settle();
    expect(r.h.state).to.equal('remediating');
    expect(r.h.quarantine(r.clock.now())).to.equal(false);
    expect(r.quarantines).to.deep.equal(['3:manual']);
    r.h.stop();
  });

  it('stop cancels the pending rung and starts no other', async () => {
    const r = rig();
    r.actions.script.newCircuit.push('reject');
    captchas(r, 2);
    await r.clock.settle();
    expect(r.clock.pendingTimers).to.equal(1);
    r.h.stop();
    expect(r.clock.pendingTimers).to.equal(0);
    await r.clock.advance(60 * MIN);
    expect(r.actions.calls).to.deep.equal(['newCircuit@10000']);
  });

  it('survives listeners that throw', async () => {
    const r = rig({}, { throwing: true });
    captchas(r, 2);
    await r.clock.settle();
    expect(r.h.state).to.equal('probation');
  });

  it('slides its window on tick and ignores failures in a rotation window', () => {
    const r = rig();
    const t0 = r.clock.now();
    r.h.failure('other', 'transport', true, t0);
    r.h.tick(t0 + 5 * MIN - 1);
    expect(r.h.state).to.equal('degraded');
    r.h.tick(t0 + 5 * MIN);
    expect(r.h.state).to.equal('healthy');
    r.h.rotationStarted(t0 + 6 * MIN);
    r.h.failure('captcha', 'client', true, t0 + 6 * MIN);
    r.h.rotationEnded(t0 + 7 * MIN);
    r.h.failure('captcha', 'client', true, t0 + 7 * MIN + 4 * SEC);
    r.h.failure('other', 'client', false, t0 + 8 * MIN);
    expect(r.h.view()).to.include({ state: 'healthy', client_failures: 0, transport_failures: 1 });
    expect(r.h.lifetime()).to.deep.equal({ transport: 1, client: 3, byKind: { other: 2, captcha: 2 }, remediations: 0, unscored: 3 });
  });
});

describe('health: instance health across a restart (durable state)', () => {
  it('an instance restored under remediation stays out of service and resumes its rung after the new process bootstraps, with what was left of its delay', async () => {
    const before = rig();
    // Recurrence escalates: new_circuit, then (within the recurrence window) wipe_restart.
    captchas(before, 2);
    await before.clock.settle();
    before.h.success(before.clock.now());
    captchas(before, 2);
    const snapshot = before.h.persistable();
    expect(snapshot.state).to.equal('quarantined');
    expect(snapshot.pending).to.include({ rung: 'wipe_restart' });
    before.h.stop();

    const clock = new ManualClock(before.clock.now() + 2 * SEC);
    const actions = new ScriptedActions(clock);
    const h = new InstanceHealth({ id: 3, config: CONFIG, actions, clock, log: quietLogger() });
    h.restore(snapshot);
    expect(h.state).to.equal('quarantined');
    expect(h.routable()).to.equal(false);
    await clock.settle();
    expect(actions.calls, 'nothing runs before the new process has bootstrapped').to.deep.equal([]);
    expect(h.persistable().pending, 'a second restart meanwhile keeps it').to.include({ rung: 'wipe_restart' });
    h.bootstrapped(clock.now());
    await clock.settle();
    expect(actions.calls[0]).to.match(/^wipeRestart@/);
    expect(h.state).to.equal('probation');
    expect(h.view().remediation_rung).to.equal('wipe_restart');
  });

  it('a routable instance comes back as starting with its failure window, and is degraded once it bootstraps', () => {
    const before = rig();
    before.h.failure('other', 'client', true, before.clock.now());
    const h = new InstanceHealth({ id: 3, config: CONFIG, actions: new ScriptedActions(before.clock), clock: before.clock, log: quietLogger() });
    h.restore(before.h.persistable());
    expect(h.state).to.equal('starting');
    h.bootstrapped(before.clock.now());
    expect(h.view()).to.include({ state: 'degraded', failures_in_window: 1, client_failures: 1 });
  });
});
