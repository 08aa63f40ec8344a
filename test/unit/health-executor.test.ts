import { expect } from 'chai';
import { ManualClock } from '../support/fakes/manual-clock.js';
import { RemediationExecutor, RemediationTimeoutError, type RemediationActions, type RungOutcome } from '../../supervisor/health/remediation-executor.js';
import type { RemediationPlan } from '../../supervisor/health/remediation-ladder.js';

type Behaviour = 'ok' | 'reject' | 'throw' | 'hang';
type ActionName = 'newCircuit' | 'wipeRestart' | 'restart' | 'waitUntilReady';

/** Actions that do what the script says, in order, then 'ok'; a hung one can be released later. */
export class ScriptedActions implements RemediationActions {
  readonly calls: string[] = [];
  readonly script: Record<ActionName, Behaviour[]> = { newCircuit: [], wipeRestart: [], restart: [], waitUntilReady: [] };
  private readonly hung: (() => void)[] = [];

  constructor(private readonly clock: ManualClock) {}

  newCircuit(): Promise<void> {
    return this.act('newCircuit');
  }
  wipeRestart(): Promise<void> {
    return this.act('wipeRestart');
  }
  restart(): Promise<void> {
    return this.act('restart');
  }
  waitUntilReady(timeoutMs: number): Promise<void> {
    return this.act('waitUntilReady', `(${timeoutMs})`);
  }

  /** Lets every hung action finish successfully now. */
  releaseHung(): void {
    for (const resolve of this.hung.splice(0)) resolve();
  }

  private act(name: ActionName, args = ''): Promise<void> {
    this.calls.push(`${name}${args}@${this.clock.now()}`);
    const behaviour = this.script[name].shift() ?? 'ok';
    switch (behaviour) {
      case 'ok':
        return Promise.resolve();
      case 'reject':
        return Promise.reject(new Error(`${name} failed`));
      case 'throw':
        throw new Error(`${name} threw`);
      case 'hang':
        return new Promise((resolve) => this.hung.push(resolve));
    }
  }
}

const plan = (rung: RemediationPlan['rung'], delayMs = 0): RemediationPlan => ({ rung, attempt: 1, delayMs, cause: 'first' });
const TIMEOUTS = { actionTimeoutMs: 10_000, readyTimeoutMs: 60_000 };

function setup(): { clock: ManualClock; actions: ScriptedActions; executor: RemediationExecutor; begun: number[] } {
  const clock = new ManualClock(1_000);
  const actions = new ScriptedActions(clock);
  return { clock, actions, executor: new RemediationExecutor(actions, clock, TIMEOUTS), begun: [] };
}

/** Starts a run and records its outcome when it arrives. */
function start(t: ReturnType<typeof setup>, p: RemediationPlan): { outcome: RungOutcome | null } {
  const box: { outcome: RungOutcome | null } = { outcome: null };
  void t.executor.run(p, () => t.begun.push(t.clock.now())).then((o) => (box.outcome = o));
  return box;
}

describe('health: remediation executor', () => {
  const rungs: [RemediationPlan['rung'], string][] = [
    ['new_circuit', 'newCircuit'],
    ['wipe_restart', 'wipeRestart'],
    ['restart_backoff', 'restart'],
  ];
  for (const [rung, action] of rungs) {
    it(`runs ${rung} through ${action}, then waits for readiness`, async () => {
      const t = setup();
      const run = start(t, plan(rung));
      expect(t.begun).to.deep.equal([]); // never begins inside the caller's own transition
      await t.clock.settle();
      expect(run.outcome).to.deep.equal({ status: 'done' });
      expect(t.actions.calls).to.deep.equal([`${action}@1000`, 'waitUntilReady(60000)@1000']);
      expect(t.begun).to.deep.equal([1000]);
      expect(t.clock.pendingTimers).to.equal(0);
      expect(t.executor.busy).to.equal(false);
    });
  }

  it('waits the plan delay before it begins', async () => {
    const t = setup();
    const run = start(t, plan('restart_backoff', 30_000));
    await t.clock.advance(29_999);
    expect(t.begun).to.deep.equal([]);
    expect(t.actions.calls).to.deep.equal([]);
    expect(t.executor.busy).to.equal(true);
    await t.clock.advance(1);
    expect(t.begun).to.deep.equal([31_000]);
    expect(run.outcome).to.deep.equal({ status: 'done' });
  });

  for (const behaviour of ['reject', 'throw'] as const) {
    it(`reports a rung whose action does ${behaviour} as failed`, async () => {
      const t = setup();
      t.actions.script.wipeRestart.push(behaviour);
      const run = start(t, plan('wipe_restart'));
      await t.clock.settle();
      expect(run.outcome?.status).to.equal('failed');
      expect(run.outcome?.status === 'failed' && run.outcome.error.message).to.match(/wipeRestart/);
      expect(t.actions.calls).to.deep.equal(['wipeRestart@1000']);
    });
  }

  it('times out an action that never finishes', async () => {
    const t = setup();
    t.actions.script.newCircuit.push('hang');
    const run = start(t, plan('new_circuit'));
    await t.clock.advance(9_999);
    expect(run.outcome).to.equal(null);
    await t.clock.advance(1);
    expect(run.outcome?.status).to.equal('failed');
    const error = run.outcome?.status === 'failed' ? run.outcome.error : null;
    expect(error).to.be.instanceOf(RemediationTimeoutError);
    expect(error).to.include({ step: 'action', rung: 'new_circuit', timeoutMs: 10_000 });
    expect(t.clock.pendingTimers).to.equal(0);
  });

  it('catches a bootstrap stall after a restart with the readiness timeout', async () => {
    const t = setup();
    t.actions.script.waitUntilReady.push('hang');
    const run = start(t, plan('restart_backoff'));
    await t.clock.advance(59_999);
    expect(run.outcome).to.equal(null);
    await t.clock.advance(1);
    const error = run.outcome?.status === 'failed' ? run.outcome.error : null;
    expect(error).to.be.instanceOf(RemediationTimeoutError);
    expect(error).to.include({ step: 'ready', rung: 'restart_backoff' });
    expect(t.clock.pendingTimers).to.equal(0);
  });

  it('cancels during the delay: never begins, leaves no timer', async () => {
    const t = setup();
    const run = start(t, plan('restart_backoff', 30_000));
    await t.clock.advance(10_000);
    t.executor.cancel();
    await t.clock.settle();
    expect(run.outcome).to.deep.equal({ status: 'cancelled' });
    expect(t.clock.pendingTimers).to.equal(0);
    await t.clock.advance(60_000);
    expect(t.begun).to.deep.equal([]);
    expect(t.actions.calls).to.deep.equal([]);
  });

  it('cancels a running action and ignores its late result', async () => {
    const t = setup();
    t.actions.script.wipeRestart.push('hang');
    const run = start(t, plan('wipe_restart'));
    await t.clock.advance(1_000);
    t.executor.cancel();
    await t.clock.settle();
    expect(run.outcome).to.deep.equal({ status: 'cancelled' });
    expect(t.clock.pendingTimers).to.equal(0);
    t.actions.releaseHung();
    await t.clock.advance(100_000);
    expect(run.outcome).to.deep.equal({ status: 'cancelled' });
    expect(t.actions.calls).to.deep.equal(['wipeRestart@1000']);
  });

  it('cancels the previous run when a new one starts', async () => {
    const t = setup();
    const first = start(t, plan('restart_backoff', 30_000));
    const second = start(t, plan('new_circuit'));
    await t.clock.settle();
    expect(first.outcome).to.deep.equal({ status: 'cancelled' });
    expect(second.outcome).to.deep.equal({ status: 'done' });
    expect(t.clock.pendingTimers).to.equal(0);
  });

  it('does nothing on cancel when idle', () => {
    const t = setup();
    t.executor.cancel();
    expect(t.executor.busy).to.equal(false);
  });
});
