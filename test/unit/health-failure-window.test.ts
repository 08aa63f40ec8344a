import { expect } from 'chai';
import fc from 'fast-check';
import '../support/fixtures/fuzz-runs.js';
import { FAILURE_KINDS, type FailureKind } from '../../shared/health/failure-kind.js';
import { FailureTally } from '../../supervisor/health/failure-tally.js';
import { FailureWindow } from '../../supervisor/health/failure-window.js';
import { PersistentQueue } from '../../supervisor/health/persistent-queue.js';
import { scoringRules } from '../../supervisor/health/weights.js';

const WINDOW = 300_000;
const empty = (s = 5): FailureWindow => FailureWindow.empty(WINDOW, scoringRules(s));

function addAll(w: FailureWindow, at: number, ...kinds: FailureKind[]): FailureWindow {
  for (const k of kinds) w = w.add(at, k);
  return w;
}

describe('health: persistent queue', () => {
  it('behaves like an array queue and keeps old versions intact (property)', () => {
    const op = fc.oneof(fc.record({ push: fc.integer() }), fc.constant({ pop: true as const }));
    fc.assert(
      fc.property(fc.array(op, { maxLength: 200 }), (ops) => {
        let q = PersistentQueue.empty<number>();
        const model: number[] = [];
        const history: [PersistentQueue<number>, number[]][] = [];
        for (const o of ops) {
          if ('push' in o) {
            q = q.push(o.push);
            model.push(o.push);
          } else {
            q = q.pop();
            model.shift();
          }
          history.push([q, [...model]]);
          expect(q.size).to.equal(model.length);
          expect(q.peek()).to.equal(model[0]);
        }
        for (const [version, contents] of history) expect([...version]).to.deep.equal(contents);
      }),
    );
  });
});

describe('health: failure window', () => {
  it('sums weights and counts reports', () => {
    const w = addAll(empty(), 0, 'captcha', 'blocked', 'other', 'transport', 'rate_limited');
    expect(w.size).to.equal(5);
    expect(w.score).to.equal(2.5 + 1.75 + 1 + 1 + 0.25);
    expect(w.kinds()).to.deep.equal(['captcha', 'blocked', 'other', 'transport', 'rate_limited']);
  });

  it('drops a report exactly FAILURE_WINDOW after it arrived, not before', () => {
    const w = empty().add(1000, 'other').add(2000, 'captcha');
    expect(w.expire(1000 + WINDOW - 1).size).to.equal(2);
    const one = w.expire(1000 + WINDOW);
    expect(one.size).to.equal(1);
    expect(one.score).to.equal(2.5);
    expect(one.oldestAt).to.equal(2000);
    expect(w.expire(2000 + WINDOW).isEmpty).to.equal(true);
    expect(w.expire(2000 + WINDOW).score).to.equal(0);
  });

  it('is immutable: adding or expiring leaves the old window as it was', () => {
    const a = empty().add(0, 'other');
    const b = a.add(1, 'captcha');
    const c = b.expire(WINDOW);
    expect([a.size, b.size, c.size]).to.deep.equal([1, 2, 1]);
    expect([a.score, b.score, c.score]).to.deep.equal([1, 3.5, 2.5]);
  });

  it('counts consecutive exit-blaming failures across kinds, never rate limits', () => {
    const w = addAll(empty(), 0, 'captcha', 'rate_limited', 'blocked', 'rate_limited', 'transport', 'other');
    expect(w.consecutive).to.equal(4);
  });

  it('resets consecutive on success but keeps the window', () => {
    const w = addAll(empty(), 0, 'other', 'blocked').success();
    expect(w.consecutive).to.equal(0);
    expect(w.size).to.equal(2);
    expect(w.score).to.equal(2.75);
    expect(w.add(1, 'other').consecutive).to.equal(1);
  });

  it('ignores a success that ended no later than the latest failure (it was reported late), not one that ended after', () => {
    const w = empty().add(100, 'blocked');
    expect(w.success(90).consecutive, 'ended before the report').to.equal(1);
    expect(w.success(100).consecutive, 'ended at the same moment').to.equal(1);
    expect(w.success(101).consecutive).to.equal(0);
    expect(w.success().consecutive, 'a success of unknown time counts as now').to.equal(0);
    // A transport failure learnt a batch late carries the time its connection ended.
    const late = empty().add(500, 'transport', 50);
    expect(late.success(60).consecutive).to.equal(0);
    expect(late.success(40).consecutive).to.equal(1);
    // Rate limits do not move the mark: they are not part of the run.
    expect(w.add(300, 'rate_limited').success(200).consecutive).to.equal(0);
  });

  it('lets consecutive failures expire with the window', () => {
    const w = addAll(empty(), 0, 'other', 'other').add(60_000, 'other');
    expect(w.consecutive).to.equal(3);
    expect(w.expire(WINDOW).consecutive).to.equal(1);
    expect(w.expire(60_000 + WINDOW).consecutive).to.equal(0);
  });

  it('does not count failures from before a success when they expire', () => {
    const w = addAll(empty(), 0, 'other', 'other').success().add(10, 'other').add(20, 'other');
    expect(w.consecutive).to.equal(2);
    expect(w.expire(WINDOW + 5).consecutive).to.equal(2);
    expect(w.expire(WINDOW + 15).consecutive).to.equal(1);
  });

  it('caps the rate limits at half the quarantine score, however many arrive', () => {
    let w = empty();
    for (let i = 0; i < 400; i++) w = w.add(i, 'rate_limited');
    expect(w.size).to.equal(400);
    expect(w.score).to.equal(2.5);
    expect(w.consecutive).to.equal(0);
    expect(w.add(500, 'other').score).to.equal(3.5);
  });

  it('keeps size, score and consecutive equal to a naive recomputation (property)', () => {
    type Op = { t: 'fail'; dt: number; kind: FailureKind } | { t: 'ok'; dt: number } | { t: 'expire'; dt: number };
    const dt = fc.integer({ min: 0, max: 120_000 });
    const op: fc.Arbitrary<Op> = fc.oneof(
      fc.record({ t: fc.constant('fail' as const), dt, kind: fc.constantFrom(...FAILURE_KINDS) }),
      fc.record({ t: fc.constant('ok' as const), dt }),
      fc.record({ t: fc.constant('expire' as const), dt }),
    );
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 12 }), fc.array(op, { maxLength: 150 }), (s, ops) => {
        const rules = scoringRules(s);
        let w = FailureWindow.empty(WINDOW, rules);
        const log: ({ at: number; kind: FailureKind } | { at: number; ok: true })[] = [];
        let now = 0;
        for (const o of ops) {
          now += o.dt;
          w = w.expire(now);
          if (o.t === 'fail') {
            w = w.add(now, o.kind);
            log.push({ at: now, kind: o.kind });
          } else if (o.t === 'ok') {
            w = w.success();
            log.push({ at: now, ok: true });
          }
          const live = log.filter((e): e is { at: number; kind: FailureKind } => 'kind' in e && e.at > now - WINDOW);
          const blaming = live.filter((e) => e.kind !== 'rate_limited').reduce((sum, e) => sum + rules.weights[e.kind], 0);
          const limited = live.filter((e) => e.kind === 'rate_limited').reduce((sum, e) => sum + rules.weights[e.kind], 0);
          let run = 0;
          for (let i = log.length - 1; i >= 0; i--) {
            const e = log[i] as { at: number; kind?: FailureKind; ok?: true };
            if (e.ok) break;
            if (e.kind !== 'rate_limited' && e.at > now - WINDOW) run++;
          }
          expect(w.size).to.equal(live.length);
          expect(w.score).to.equal(blaming + Math.min(limited, rules.rateLimitedCap));
          expect(w.consecutive).to.equal(run);
        }
      }),
    );
  });
});

describe('health: failure tally', () => {
  it('counts by source and shows only the kinds seen', () => {
    const t = FailureTally.empty().add('client', 'captcha').add('transport', 'transport').add('client', 'captcha');
    expect(t.client).to.equal(2);
    expect(t.transport).to.equal(1);
    expect(t.total).to.equal(3);
    expect(t.byKind()).to.deep.equal({ captcha: 2, transport: 1 });
    expect(FailureTally.empty().byKind()).to.deep.equal({});
  });

  it('hands out copies of its kind map', () => {
    const t = FailureTally.empty().add('client', 'other');
    t.byKind().other = 99;
    expect(t.byKind()).to.deep.equal({ other: 1 });
  });
});
