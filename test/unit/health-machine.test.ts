import { expect } from 'chai';
import fc from 'fast-check';
import '../support/fixtures/fuzz-runs.js';
import { loadConfig } from '../../shared/config/index.js';
import { FAILURE_KINDS, type FailureKind, type FailureSource } from '../../shared/health/failure-kind.js';
import {
  healthView,
  initialHealthState,
  reduceHealth,
  type HealthConfig,
  type HealthEffect,
  type HealthEvent,
  type HealthMachineState,
  type HealthState,
} from '../../supervisor/health/health-machine.js';
import { RUNG_RETRY_DELAY_MS } from '../../supervisor/health/remediation-ladder.js';

const SEC = 1000;
const MIN = 60 * SEC;
const CONFIG: HealthConfig = {
  quarantineFailures: 5,
  quarantineConsecutive: 3,
  failureWindowMs: 5 * MIN,
  rotationGraceMs: 5 * SEC,
  remediationBackoffBaseMs: 30 * SEC,
  remediationBackoffMaxMs: 10 * MIN,
  remediationRecurrenceWindowMs: 30 * MIN,
};

const fail = (kind: FailureKind, source: FailureSource = 'client', scored = true): HealthEvent => ({ type: 'failure', kind, source, scored });
const ok: HealthEvent = { type: 'success' };
const tick: HealthEvent = { type: 'tick' };
const began: HealthEvent = { type: 'remediationBegan' };
const done: HealthEvent = { type: 'remediationRungDone' };
const broke: HealthEvent = { type: 'remediationRungFailed', error: 'boom' };
const manual: HealthEvent = { type: 'manualQuarantine' };
const release: HealthEvent = { type: 'release' };
const up: HealthEvent = { type: 'bootstrapped' };
const down: HealthEvent = { type: 'unbootstrapped' };
const exitDown: HealthEvent = { type: 'exitDown' };

interface Driven {
  s: HealthMachineState;
  effects: HealthEffect[];
  last: HealthEffect[];
  refused: boolean;
}

/** Applies events one second apart from `start` (or at the given times). */
function drive(s: HealthMachineState, events: (HealthEvent | [number, HealthEvent])[], config = CONFIG, start = 1000): Driven {
  const effects: HealthEffect[] = [];
  let last: HealthEffect[] = [];
  let refused = false;
  let now = start;
  for (const e of events) {
    const [at, event] = Array.isArray(e) ? e : [now + SEC, e];
    now = at;
    const t = reduceHealth(s, event, now, config);
    s = t.state;
    last = t.effects;
    refused = t.refused !== undefined;
    effects.push(...t.effects);
  }
  return { s, effects, last, refused };
}

const fresh = (config = CONFIG): HealthMachineState => drive(initialHealthState(config), [[0, up]], config).s;
const of = (events: (HealthEvent | [number, HealthEvent])[], config = CONFIG): Driven => drive(fresh(config), events, config);
const types = (effects: HealthEffect[]): string[] => effects.map((e) => e.type);

/** Reaches each state from a fresh instance. */
const reach: Record<HealthState, (HealthEvent | [number, HealthEvent])[]> = {
  starting: [down],
  healthy: [],
  degraded: [fail('other')],
  quarantined: [manual],
  remediating: [manual, began],
  probation: [manual, began, done],
};

describe('health: state machine', () => {
  it('uses the documented defaults of the configuration', () => {
    const c = loadConfig({});
    expect({
      quarantineFailures: c.quarantineFailures,
      quarantineConsecutive: c.quarantineConsecutive,
      failureWindowMs: c.failureWindowMs,
      rotationGraceMs: c.rotationGraceMs,
      remediationBackoffBaseMs: c.remediationBackoffBaseMs,
      remediationBackoffMaxMs: c.remediationBackoffMaxMs,
      remediationRecurrenceWindowMs: c.remediationRecurrenceWindowMs,
    }).to.deep.equal(CONFIG);
  });

  it('starts in starting, with an empty health object', () => {
    expect(healthView(initialHealthState(CONFIG))).to.deep.equal({
      state: 'starting',
      failures_in_window: 0,
      consecutive_failures: 0,
      failure_score: 0,
      quarantine_score: 5,
      transport_failures: 0,
      client_failures: 0,
      failures_by_kind: {},
      remediations: 0,
      remediation_rung: 'none',
    });
  });

  describe('transitions', () => {
    interface Row {
      name: string;
      events: (HealthEvent | [number, HealthEvent])[];
      state: HealthState;
      config?: Partial<HealthConfig>;
      from?: HealthMachineState;
      view?: Partial<ReturnType<typeof healthView>>;
    }
    const rows: Row[] = [
      { name: 'starting -> healthy on bootstrap', from: initialHealthState(CONFIG), events: [up], state: 'healthy' },
      { name: 'starting stays starting on a failure (counted, not weighed)', from: initialHealthState(CONFIG), events: [fail('captcha')], state: 'starting', view: { client_failures: 1, failures_in_window: 0 } },
      { name: 'healthy -> degraded on the first failure', events: [fail('other')], state: 'degraded', view: { failures_in_window: 1, failure_score: 1, consecutive_failures: 1 } },
      { name: 'healthy -> degraded on a rate limit', events: [fail('rate_limited')], state: 'degraded', view: { failure_score: 0.25, consecutive_failures: 0 } },
      { name: 'healthy stays healthy on success', events: [ok, ok], state: 'healthy' },
      { name: 'degraded stays degraded on success (the window is not reset)', events: [fail('blocked'), ok], state: 'degraded', view: { consecutive_failures: 0, failures_in_window: 1, failure_score: 1.75 } },
      { name: 'degraded -> healthy when the window empties', events: [[10 * SEC, fail('blocked')], [10 * SEC + 5 * MIN, tick]], state: 'healthy', view: { failures_in_window: 0, failure_score: 0, client_failures: 1 } },
      { name: 'degraded stays degraded until the last report leaves', events: [[10 * SEC, fail('other')], [20 * SEC, fail('other')], [10 * SEC + 5 * MIN, tick]], state: 'degraded', view: { failures_in_window: 1 } },
      { name: 'one captcha degrades', events: [fail('captcha')], state: 'degraded', view: { failure_score: 2.5 } },
      { name: 'two captchas quarantine (score 5 of 5)', events: [fail('captcha'), fail('captcha')], state: 'quarantined', view: { failure_score: 5, remediation_rung: 'new_circuit' } },
      { name: 'two captchas out of one window do not', events: [[0, fail('captcha')], [5 * MIN, fail('captcha')]], state: 'degraded' },
      { name: 'three blocked quarantine', events: [fail('blocked'), ok, fail('blocked'), ok, fail('blocked')], state: 'quarantined', view: { failure_score: 5.25 } },
      { name: 'five others with successes between quarantine by score', events: [fail('other'), ok, fail('other'), ok, fail('other'), ok, fail('other'), ok, fail('other')], state: 'quarantined' },
      { name: 'four others with successes between do not', events: [fail('other'), ok, fail('other'), ok, fail('other'), ok, fail('other'), ok], state: 'degraded', view: { failure_score: 4 } },
      { name: 'three consecutive failures quarantine below the score', events: [fail('other'), fail('transport', 'transport'), fail('other')], state: 'quarantined', view: { failure_score: 3, consecutive_failures: 3 } },
      { name: 'consecutive counts across kinds', events: [fail('blocked'), fail('transport', 'transport'), fail('other')], state: 'quarantined', view: { consecutive_failures: 3, failure_score: 3.75 } },
      {
        name: "a success reported after the client's report about that request does not break the run (the scraper's loop)",
        events: [
          [1000, fail('blocked')], [1400, { type: 'success', endedAt: 900 }],
          [2000, fail('blocked')], [2400, { type: 'success', endedAt: 1900 }],
          [3000, fail('blocked')],
        ],
        state: 'quarantined',
        view: { consecutive_failures: 3 },
        config: { quarantineFailures: 50 },
      },
      { name: 'a success that ended after the latest report breaks the run', events: [[1000, fail('blocked')], [1400, { type: 'success', endedAt: 1200 }], [2000, fail('blocked')]], state: 'degraded', view: { consecutive_failures: 1 }, config: { quarantineFailures: 50 } },
      { name: 'a success breaks the run', events: [fail('other'), fail('other'), ok, fail('other'), fail('other')], state: 'degraded', view: { consecutive_failures: 2, failure_score: 4 } },
      { name: 'rate limits between do not break the run nor count to it', events: [fail('other'), fail('rate_limited'), fail('other'), fail('rate_limited')], state: 'degraded', view: { consecutive_failures: 2 } },
      { name: 'a run does not outlive the window', events: [[0, fail('other')], [SEC, fail('other')], [SEC + 5 * MIN, tick], [SEC + 5 * MIN + 1, fail('other')]], state: 'degraded', view: { consecutive_failures: 1 } },
      { name: 'rate limits plus real failures quarantine', events: [...Array<HealthEvent>(20).fill(fail('rate_limited')), fail('other'), ok, fail('other'), ok, fail('other')], state: 'quarantined', view: { failure_score: 5.5 } },
      { name: 'unscored failures change nothing but counters', events: Array<HealthEvent>(50).fill(fail('captcha', 'client', false)), state: 'healthy', view: { failure_score: 0, client_failures: 0, failures_by_kind: {} } },
      { name: 'QUARANTINE_FAILURES=1: one other quarantines', config: { quarantineFailures: 1 }, events: [fail('other')], state: 'quarantined' },
      { name: 'QUARANTINE_FAILURES=1: one captcha quarantines', config: { quarantineFailures: 1 }, events: [fail('captcha')], state: 'quarantined' },
      { name: 'QUARANTINE_FAILURES=1: one rate limit does not', config: { quarantineFailures: 1 }, events: [fail('rate_limited')], state: 'degraded', view: { quarantine_score: 1 } },
      { name: 'QUARANTINE_FAILURES=1: rate limits alone never do', config: { quarantineFailures: 1 }, events: Array<HealthEvent>(100).fill(fail('rate_limited')), state: 'degraded', view: { failure_score: 0.5 } },
      { name: 'QUARANTINE_FAILURES=2: one captcha does not', config: { quarantineFailures: 2 }, events: [fail('captcha')], state: 'degraded', view: { failure_score: 1.5 } },
      { name: 'QUARANTINE_FAILURES=2: a captcha and an other do', config: { quarantineFailures: 2 }, events: [fail('captcha'), ok, fail('other')], state: 'quarantined' },
      { name: 'QUARANTINE_FAILURES=2: two others do', config: { quarantineFailures: 2 }, events: [fail('other'), ok, fail('other')], state: 'quarantined' },
      { name: 'QUARANTINE_FAILURES=3: one captcha does not', config: { quarantineFailures: 3 }, events: [fail('captcha')], state: 'degraded' },
      { name: 'QUARANTINE_FAILURES=3: two captchas do', config: { quarantineFailures: 3 }, events: [fail('captcha'), ok, fail('captcha')], state: 'quarantined', view: { failure_score: 3 } },
      { name: 'QUARANTINE_FAILURES=3: two blocked do not', config: { quarantineFailures: 3 }, events: [fail('blocked'), ok, fail('blocked')], state: 'degraded', view: { failure_score: 2.5 } },
      { name: 'QUARANTINE_CONSECUTIVE=1: one report does not quarantine a healthy instance', config: { quarantineConsecutive: 1 }, events: [fail('captcha')], state: 'degraded' },
      { name: 'QUARANTINE_CONSECUTIVE=1: the next one does', config: { quarantineConsecutive: 1 }, events: [fail('other'), ok, fail('other')], state: 'quarantined' },
      { name: 'QUARANTINE_CONSECUTIVE=1: rate limits never do', config: { quarantineConsecutive: 1 }, events: Array<HealthEvent>(10).fill(fail('rate_limited')), state: 'degraded' },
      { name: 'quarantined -> remediating when the ladder begins', events: [manual, began], state: 'remediating', view: { remediations: 1, remediation_rung: 'new_circuit' } },
      { name: 'remediating -> probation when the rung completes (window cleared)', events: [fail('captcha'), fail('captcha'), began, done], state: 'probation', view: { failures_in_window: 0, failure_score: 0, consecutive_failures: 0, client_failures: 2, failures_by_kind: { captcha: 2 }, remediation_rung: 'new_circuit' } },
      { name: 'remediating stays remediating when a rung fails (retry)', events: [manual, began, broke], state: 'remediating' },
      { name: 'probation -> healthy when a request survives', events: [manual, began, done, ok], state: 'healthy', view: { remediation_rung: 'none', remediations: 1 } },
      { name: 'probation -> quarantined on a failure', events: [manual, began, done, fail('other')], state: 'quarantined', view: { remediation_rung: 'wipe_restart' } },
      { name: 'probation -> quarantined on a transport failure seen by the pool', events: [manual, began, done, fail('transport', 'transport')], state: 'quarantined' },
      { name: 'probation -> quarantined when its new exit dies (the pool’s own evidence)', events: [manual, began, done, exitDown], state: 'quarantined', view: { transport_failures: 1, remediation_rung: 'wipe_restart' } },
      { name: 'probation -> quarantined when its exit dies, even within the rotation grace', events: [manual, began, done, { type: 'rotationStarted' }, { type: 'rotationEnded' }, exitDown], state: 'quarantined' },
      { name: 'a healthy instance whose exit dies is not blamed: nothing weighed', events: [exitDown], state: 'healthy', view: { failures_in_window: 0, transport_failures: 0 } },
      { name: 'a degraded instance whose exit dies stays degraded', events: [fail('other'), exitDown], state: 'degraded', view: { failures_in_window: 1 } },
      { name: 'a remediating instance whose new exit dies stays remediating (the rung fails on its own)', events: [manual, began, exitDown], state: 'remediating' },
      { name: 'probation stays on a success that ended before it began (it went through the replaced exit)', events: [manual, began, [10 * SEC, done], [11 * SEC, { type: 'success', endedAt: 9 * SEC }]], state: 'probation' },
      { name: 'probation -> healthy on a success that ended after it began', events: [manual, began, [10 * SEC, done], [11 * SEC, { type: 'success', endedAt: 10.5 * SEC }]], state: 'healthy' },
      { name: 'probation stays on rate limits, however many', events: [manual, began, done, ...Array<HealthEvent>(200).fill(fail('rate_limited'))], state: 'probation' },
      { name: 'probation stays on unscored failures', events: [manual, began, done, fail('captcha', 'client', false)], state: 'probation' },
      { name: 'probation with rate limits in the window -> degraded on success', events: [manual, began, done, fail('rate_limited'), ok], state: 'degraded' },
      { name: 'quarantined ignores failures in its window', events: [manual, fail('captcha'), fail('captcha')], state: 'quarantined', view: { client_failures: 2, failures_in_window: 0 } },
      { name: 'remediating ignores failures in its window', events: [manual, began, fail('other')], state: 'remediating', view: { failures_in_window: 0, client_failures: 1 } },
      { name: 'release from quarantined -> healthy, everything cleared', events: [fail('captcha'), fail('captcha'), release], state: 'healthy', view: { failures_in_window: 0, failure_score: 0, consecutive_failures: 0, client_failures: 0, transport_failures: 0, failures_by_kind: {}, remediation_rung: 'none' } },
      { name: 'release from remediating -> healthy', events: [manual, began, release], state: 'healthy', view: { remediations: 1 } },
      { name: 'release of a remediating instance mid-restart -> starting', events: [manual, began, down, release], state: 'starting' },
      { name: 'release from degraded -> healthy, failures cleared', events: [fail('other'), fail('transport', 'transport'), release], state: 'healthy', view: { failures_in_window: 0, transport_failures: 0 } },
      { name: 'release from probation -> healthy', events: [manual, began, done, fail('rate_limited'), release], state: 'healthy' },
      { name: 'release of a starting instance stays starting', from: initialHealthState(CONFIG), events: [release], state: 'starting' },
      { name: 'healthy -> starting when the process dies', events: [down], state: 'starting' },
      { name: 'degraded -> starting -> degraded when it comes back with failures in the window', events: [fail('other'), down, up], state: 'degraded' },
      { name: 'probation -> starting when the process dies', events: [manual, began, done, down], state: 'starting' },
      { name: 'remediating keeps the instance through its own restart', events: [manual, began, down, up], state: 'remediating' },
      { name: 'quarantined keeps the instance through a restart', events: [manual, down, up], state: 'quarantined' },
      { name: 'stale remediation outcomes are ignored once released', events: [manual, began, release, done, broke, began], state: 'healthy', view: { remediation_rung: 'none' } },
    ];
    for (const row of rows) {
      it(row.name, () => {
        const config = { ...CONFIG, ...row.config };
        const r = drive(row.from ?? fresh(config), row.events, config);
        expect(r.s.state).to.equal(row.state);
        const { failures_by_kind: byKind, ...scalars } = row.view ?? {};
        expect(healthView(r.s)).to.include(scalars);
        if (byKind) expect(healthView(r.s).failures_by_kind).to.deep.equal(byKind);
      });
    }
  });

  describe('manual quarantine', () => {
    for (const from of ['healthy', 'degraded', 'probation'] as const) {
      it(`takes ${from} to quarantined, moving sessions and starting the ladder`, () => {
        const before = of(reach[from]);
        expect(before.s.state).to.equal(from);
        const r = drive(before.s, [manual]);
        expect(r.refused).to.equal(false);
        expect(r.s.state).to.equal('quarantined');
        expect(types(r.last)).to.deep.equal(['moveSessions', 'audit', 'startRemediation']);
        expect(r.last[0]).to.deep.equal({ type: 'moveSessions', cause: 'manual' });
      });
    }
    for (const from of ['starting', 'quarantined', 'remediating'] as const) {
      it(`refuses from ${from} (409) and changes nothing`, () => {
        const before = of(reach[from]);
        expect(before.s.state).to.equal(from);
        const r = drive(before.s, [manual]);
        expect(r.refused).to.equal(true);
        expect(r.last).to.deep.equal([]);
        expect(r.s).to.equal(before.s);
      });
    }
  });

  describe('effects', () => {
    it('on an automatic quarantine: move sessions, audit, start the new-circuit rung at once', () => {
      const r = of([fail('captcha'), fail('captcha')]);
      expect(types(r.last)).to.deep.equal(['moveSessions', 'audit', 'startRemediation']);
      expect(r.last[0]).to.deep.equal({ type: 'moveSessions', cause: 'score' });
      const audit = r.last[1] as Extract<HealthEffect, { type: 'audit' }>;
      expect(audit.audit.type).to.equal('quarantine');
      expect(audit.audit.message).to.match(/failure score 5 reached 5/);
      expect(audit.audit.details).to.include({ cause: 'score', kind: 'captcha', failure_score: 5, quarantine_score: 5, rung: 'new_circuit' });
      expect(r.last[2]).to.deep.equal({ type: 'startRemediation', plan: { rung: 'new_circuit', attempt: 1, delayMs: 0, cause: 'first' } });
    });

    it('names the consecutive threshold when that is what tripped', () => {
      const r = of([fail('other'), fail('other'), fail('other')]);
      expect(r.last[0]).to.deep.equal({ type: 'moveSessions', cause: 'consecutive' });
    });

    it('on a failed rung: audit and schedule the retry, then the escalation', () => {
      const r = of([manual, began, broke]);
      expect(types(r.last)).to.deep.equal(['audit', 'startRemediation']);
      expect(r.last[1]).to.deep.equal({ type: 'startRemediation', plan: { rung: 'new_circuit', attempt: 2, delayMs: RUNG_RETRY_DELAY_MS, cause: 'retry' } });
      const again = drive(r.s, [began, broke]);
      expect(again.last[1]).to.deep.equal({ type: 'startRemediation', plan: { rung: 'wipe_restart', attempt: 1, delayMs: 0, cause: 'escalation' } });
      expect(healthView(again.s).remediation_rung).to.equal('wipe_restart');
      expect(healthView(again.s).remediations).to.equal(1);
    });

    it('on release during a remediation: cancel it', () => {
      const r = of([manual, began, release]);
      expect(types(r.last)).to.deep.equal(['cancelRemediation', 'audit']);
      expect(types(of([fail('other'), release]).last)).to.deep.equal([]);
    });

    it('audits the rung beginning, completing and the probation passing', () => {
      const r = of([manual, began, done, ok]);
      const audits = r.effects.filter((e): e is Extract<HealthEffect, { type: 'audit' }> => e.type === 'audit').map((e) => e.audit);
      expect(audits.map((a) => a.type)).to.deep.equal(['quarantine', 'remediation', 'remediation', 'remediation']);
      expect(audits[3]?.message).to.match(/probation passed/);
    });

    it('says, when its exit died on probation, that the exit died and moves its sessions', () => {
      const r = of([manual, began, done, exitDown]);
      expect(types(r.last)).to.deep.equal(['moveSessions', 'audit', 'startRemediation']);
      const audit = r.last.find((e): e is Extract<HealthEffect, { type: 'audit' }> => e.type === 'audit')?.audit;
      expect(audit?.message).to.match(/exit it was given died on probation/);
      expect(audit?.details).to.deep.include({ cause: 'probation', exit_down: true });
    });

    it('emits nothing for routine traffic', () => {
      expect(of([fail('other'), ok, tick, fail('rate_limited')]).effects).to.deep.equal([]);
    });
  });

  describe('rules', () => {
    it('rule 1: one report quarantines a healthy instance only when QUARANTINE_FAILURES is 1 (property)', () => {
      fc.assert(
        fc.property(fc.integer({ min: 1, max: 20 }), fc.integer({ min: 1, max: 10 }), fc.constantFrom(...FAILURE_KINDS), (s, c, kind) => {
          const config = { ...CONFIG, quarantineFailures: s, quarantineConsecutive: c };
          const r = of([fail(kind)], config);
          expect(r.s.state).to.equal(s === 1 && kind !== 'rate_limited' ? 'quarantined' : 'degraded');
        }),
      );
    });

    it('rule 3: rate limits alone never quarantine, even hundreds in one window (property)', () => {
      fc.assert(
        fc.property(fc.integer({ min: 1, max: 20 }), fc.integer({ min: 1, max: 10 }), fc.integer({ min: 1, max: 400 }), fc.boolean(), (s, c, n, successes) => {
          const config = { ...CONFIG, quarantineFailures: s, quarantineConsecutive: c };
          const events: HealthEvent[] = [];
          for (let i = 0; i < n; i++) events.push(fail('rate_limited'), ...(successes && i % 7 === 0 ? [ok] : []));
          const r = drive(fresh(config), events.map((e, i): [number, HealthEvent] => [1000 + i * 10, e]), config);
          expect(r.s.state).to.equal('degraded');
          expect(r.s.window.consecutive).to.equal(0);
          expect(r.s.window.score).to.be.lessThan(s);
        }),
      );
    });

    it('rule 2: QUARANTINE_CONSECUTIVE reports of any exit-blaming kind quarantine, whatever their weight (property)', () => {
      const blaming = fc.constantFrom<FailureKind>('captcha', 'blocked', 'transport', 'other');
      fc.assert(
        fc.property(fc.integer({ min: 2, max: 8 }), fc.integer({ min: 2, max: 50 }), fc.array(blaming, { minLength: 8, maxLength: 8 }), (c, s, kinds) => {
          const config = { ...CONFIG, quarantineFailures: s, quarantineConsecutive: c };
          const events = kinds.slice(0, c).map((k) => fail(k));
          const r = of(events, config);
          expect(r.s.state).to.equal('quarantined');
          const trip = r.effects.find((e) => e.type === 'moveSessions');
          // Where the weights did not reach the score first, the run is what tripped.
          const weights = r.s.window.rules.weights;
          const scoreAt = (n: number): number => kinds.slice(0, n).reduce((sum, k) => sum + weights[k], 0);
          if (scoreAt(c) < s) expect(trip).to.deep.equal({ type: 'moveSessions', cause: 'consecutive' });
          if (scoreAt(c - 1) < s) expect(of(events.slice(0, c - 1), config).s.state).to.equal('degraded');
        }),
      );
    });

    it('rule 5: after a long quiet period the ladder restarts at the cheapest rung', () => {
      const cycle = (at: number): [number, HealthEvent][] => [[at, manual], [at + 1, began], [at + 2, done], [at + 3, ok]];
      const soon = drive(fresh(), [...cycle(MIN), [2 * MIN, manual]]);
      expect(healthView(soon.s).remediation_rung).to.equal('wipe_restart');
      const late = drive(fresh(), [...cycle(MIN), [MIN + 2 + 30 * MIN + 1, manual]]);
      expect(healthView(late.s).remediation_rung).to.equal('new_circuit');
    });

    it('rule 5: the backoff grows only with attempts at the current rung', () => {
      let s = fresh();
      const delays: number[] = [];
      let at = MIN;
      for (let i = 0; i < 5; i++) {
        const r = drive(s, [[at, manual], [at + 1, began], [at + 2, done]]);
        const start = r.effects.find((e): e is Extract<HealthEffect, { type: 'startRemediation' }> => e.type === 'startRemediation');
        delays.push(start?.plan.delayMs ?? -1);
        s = r.s;
        at += MIN;
      }
      expect(delays).to.deep.equal([0, 0, 30 * SEC, 60 * SEC, 120 * SEC]);
    });

    it('rule 7: release clears quarantine and accumulated failures but not the lifetime counters', () => {
      const r = of([fail('captcha'), fail('transport', 'transport'), fail('captcha'), release]);
      expect(healthView(r.s)).to.deep.include({ state: 'healthy', failure_score: 0, client_failures: 0, transport_failures: 0, failures_by_kind: {} });
      expect([r.s.lifetime.client, r.s.lifetime.transport]).to.deep.equal([2, 1]);
      expect(r.s.lifetime.byKind()).to.deep.equal({ captcha: 2, transport: 1 });
    });
  });

  describe('rotation window', () => {
    const rot = (type: 'rotationStarted' | 'rotationEnded'): HealthEvent => ({ type });
    it('does not score failures during a rotation nor within ROTATION_GRACE after it', () => {
      const r = drive(fresh(), [
        [10 * SEC, rot('rotationStarted')],
        [11 * SEC, fail('captcha')],
        [12 * SEC, fail('captcha')],
        [20 * SEC, rot('rotationEnded')],
        [24 * SEC, fail('captcha')],
      ]);
      expect(r.s.state).to.equal('healthy');
      expect(r.s.unscored).to.equal(3);
      expect(healthView(r.s)).to.include({ failure_score: 0, client_failures: 0 });
      const after = drive(r.s, [[25 * SEC, fail('captcha')]]);
      expect(after.s.state).to.equal('degraded');
      expect(healthView(after.s).failure_score).to.equal(2.5);
    });

    it('ends the rotation if the process restarts, so failures are scored again after the grace', () => {
      const r = drive(fresh(), [[SEC, rot('rotationStarted')], [2 * SEC, down], [3 * SEC, up], [8 * SEC, fail('other')]]);
      expect(r.s.state).to.equal('degraded');
    });
  });

  it('counts failures by source and by kind, only the kinds seen', () => {
    const r = of([fail('captcha'), ok, fail('transport', 'transport'), ok, fail('transport', 'transport'), fail('rate_limited')]);
    expect(healthView(r.s)).to.deep.include({ transport_failures: 2, client_failures: 2, failures_by_kind: { captcha: 1, transport: 2, rate_limited: 1 } });
  });

  it('never leaves healthy with failures in the window, nor degraded without (property)', () => {
    const event = fc.oneof(
      fc.constantFrom<HealthEvent>(ok, tick, began, done, broke, manual, release, up, down, { type: 'rotationStarted' }, { type: 'rotationEnded' }),
      fc.record({ type: fc.constant('failure' as const), kind: fc.constantFrom(...FAILURE_KINDS), source: fc.constantFrom<FailureSource>('client', 'transport'), scored: fc.boolean() }),
    );
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.integer({ min: 0, max: 2 * MIN }), event), { maxLength: 120 }), (steps) => {
        let s = initialHealthState(CONFIG);
        let now = 0;
        for (const [dt, e] of steps) {
          now += dt;
          s = reduceHealth(s, e, now, CONFIG).state;
          if (s.state === 'healthy') expect(s.window.isEmpty).to.equal(true);
          if (s.state === 'degraded') expect(s.window.isEmpty).to.equal(false);
          expect(s.window.score).to.be.at.least(0);
          expect(s.window.consecutive).to.be.at.least(0);
        }
      }),
    );
  });
});
