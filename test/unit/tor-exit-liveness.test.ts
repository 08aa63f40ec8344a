import { expect } from 'chai';
import fc from 'fast-check';
import { fuzzRuns } from '../support/fixtures/fuzz-runs.js';
import { parseCircuitLine } from '../../supervisor/tor/control-events.js';
import { EXIT_LIVENESS_LIMITS, PinnedExitLiveness, type LivenessAction } from '../../supervisor/tor/exit-liveness.js';
import { parseStreamTimeoutLogLine } from '../../supervisor/tor/tor-log-line.js';

/**
 * The pinned exit's liveness watch (supervisor/tor/exit-liveness.ts), fed tor's CIRC lines as
 * the private network showed them when an exit relay was killed (kill -9) or frozen (SIGSTOP).
 */

const GUARD = '1'.repeat(40);
const MIDDLE_A = '2'.repeat(40);
const MIDDLE_B = '3'.repeat(40);
const MIDDLE_C = '4'.repeat(40);
const EXIT = 'E'.repeat(40);
const OTHER_EXIT = 'F'.repeat(40);

type Hop = string;

/** One CIRC event as tor sends it; `path` lists the hops open so far. */
function circ(w: PinnedExitLiveness, now: number, id: number, status: string, path: Hop[] = [], extra = 'BUILD_FLAGS=NEED_CAPACITY PURPOSE=GENERAL'): LivenessAction[] {
  const hops = path.length > 0 ? ` ${path.map((fp, i) => `$${fp}~n${i}`).join(',')}` : '';
  return w.onCircuit(parseCircuitLine(`${id} ${status}${hops} ${extra}`), now);
}

/** A circuit tor launches under the pin that reaches its middle (two hops) and then fails with `reason`. */
function failedExtend(w: PinnedExitLiveness, now: number, id: number, middle: string, reason = 'REASON=DESTROYED REMOTE_REASON=DESTROYED'): LivenessAction[] {
  circ(w, now, id, 'LAUNCHED');
  circ(w, now, id, 'EXTENDED', [GUARD]);
  circ(w, now, id, 'EXTENDED', [GUARD, middle]);
  return circ(w, now, id, 'FAILED', [GUARD, middle], `BUILD_FLAGS=NEED_CAPACITY PURPOSE=GENERAL ${reason}`);
}

const downOf = (actions: LivenessAction[]) => actions.find((a) => a.type === 'down');
const probesOf = (actions: LivenessAction[]) => actions.filter((a) => a.type === 'probe').reduce((n, a) => n + (a.type === 'probe' ? a.circuits : 0), 0);

describe('tor: the pinned exit’s liveness watch', () => {
  it('says nothing while nothing is pinned', () => {
    const w = new PinnedExitLiveness();
    expect(failedExtend(w, 0, 1, MIDDLE_A)).to.deep.equal([]);
    expect(failedExtend(w, 0, 2, MIDDLE_B)).to.deep.equal([]);
    expect(failedExtend(w, 0, 3, MIDDLE_C)).to.deep.equal([]);
    expect(w.isDeclaredDown).to.equal(false);
  });

  it('a killed exit: its built circuits destroyed and the next extensions failing are down within the same second', () => {
    const w = new PinnedExitLiveness();
    w.pin(EXIT);
    circ(w, 0, 4, 'LAUNCHED');
    circ(w, 0, 4, 'BUILT', [GUARD, MIDDLE_A, EXIT]);
    // kill -9: the middle's connection to the exit breaks; tor is told REASON=DESTROYED REMOTE_REASON=DESTROYED.
    const first = circ(w, 1000, 4, 'CLOSED', [GUARD, MIDDLE_A, EXIT], 'BUILD_FLAGS=NEED_CAPACITY PURPOSE=GENERAL REASON=DESTROYED REMOTE_REASON=DESTROYED');
    expect(probesOf(first), 'probes at the first sign').to.equal(EXIT_LIVENESS_LIMITS.probeCircuits);
    expect(downOf(failedExtend(w, 1100, 5, MIDDLE_B)), 'two pieces are not enough').to.equal(undefined);
    const third = failedExtend(w, 1200, 6, MIDDLE_C);
    const down = downOf(third);
    expect(down?.type === 'down' && down.verdict.fingerprint).to.equal(EXIT);
    expect(down?.type === 'down' && down.verdict.evidence.map((e) => [e.kind, e.middle])).to.deep.equal([
      ['circuit_destroyed', MIDDLE_A],
      ['extend_failed', MIDDLE_B],
      ['extend_failed', MIDDLE_C],
    ]);
    expect(w.isDeclaredDown).to.equal(true);
    // Said once per pin.
    expect(downOf(failedExtend(w, 1300, 7, MIDDLE_A))).to.equal(undefined);
  });

  it('a frozen exit: extensions that get no answer count once each after EXTEND_STALL_MS', () => {
    const w = new PinnedExitLiveness();
    w.pin(EXIT);
    for (const [id, middle] of [[1, MIDDLE_A], [2, MIDDLE_B], [3, MIDDLE_C]] as const) {
      circ(w, 0, id, 'LAUNCHED');
      circ(w, 0, id, 'EXTENDED', [GUARD, middle]);
    }
    expect(w.nextDeadline()).to.equal(EXIT_LIVENESS_LIMITS.extendStallMs);
    expect(w.tick(EXIT_LIVENESS_LIMITS.extendStallMs - 1)).to.deep.equal([]);
    const down = downOf(w.tick(EXIT_LIVENESS_LIMITS.extendStallMs));
    expect(down?.type === 'down' && down.verdict.evidence.map((e) => e.kind)).to.deep.equal(['extend_stalled', 'extend_stalled', 'extend_stalled']);
    // tor's own timeout of a circuit already counted as stalled is not counted again.
    const w2 = new PinnedExitLiveness();
    w2.pin(EXIT);
    circ(w2, 0, 1, 'LAUNCHED');
    circ(w2, 0, 1, 'EXTENDED', [GUARD, MIDDLE_A]);
    w2.tick(EXIT_LIVENESS_LIMITS.extendStallMs);
    circ(w2, EXIT_LIVENESS_LIMITS.extendStallMs + 1, 1, 'FAILED', [GUARD, MIDDLE_A], 'PURPOSE=GENERAL REASON=TIMEOUT');
    expect(w2.pendingEvidence.map((e) => e.kind)).to.deep.equal(['extend_stalled']);
  });

  it('times extensions afresh after the tor itself was not answering', () => {
    const w = new PinnedExitLiveness();
    w.pin(EXIT);
    circ(w, 0, 1, 'LAUNCHED');
    circ(w, 0, 1, 'EXTENDED', [GUARD, MIDDLE_A]);
    w.restartStallClocks(4_000);
    expect(w.tick(EXIT_LIVENESS_LIMITS.extendStallMs)).to.deep.equal([]);
    expect(w.nextDeadline()).to.equal(4_000 + EXIT_LIVENESS_LIMITS.extendStallMs);
  });

  it('one middle that cannot reach the exit is not the exit being down', () => {
    const w = new PinnedExitLiveness();
    w.pin(EXIT);
    for (let id = 1; id <= 5; id++) expect(downOf(failedExtend(w, id * 100, id, MIDDLE_A))).to.equal(undefined);
    expect(downOf(failedExtend(w, 600, 6, MIDDLE_B))?.type).to.equal('down');
  });

  it('a circuit through the exit built in between clears the evidence', () => {
    const w = new PinnedExitLiveness();
    w.pin(EXIT);
    failedExtend(w, 0, 1, MIDDLE_A);
    failedExtend(w, 0, 2, MIDDLE_B);
    circ(w, 10, 3, 'LAUNCHED');
    circ(w, 10, 3, 'BUILT', [GUARD, MIDDLE_C, EXIT]);
    expect(w.pendingEvidence).to.deep.equal([]);
    expect(downOf(failedExtend(w, 20, 4, MIDDLE_C))).to.equal(undefined);
  });

  it('evidence older than the window is forgotten', () => {
    const w = new PinnedExitLiveness();
    w.pin(EXIT);
    failedExtend(w, 0, 1, MIDDLE_A);
    failedExtend(w, 1, 2, MIDDLE_B);
    expect(downOf(failedExtend(w, EXIT_LIVENESS_LIMITS.windowMs + 1, 3, MIDDLE_C))).to.equal(undefined);
  });

  it('counts only what points at the exit', () => {
    const w = new PinnedExitLiveness();
    w.pin(EXIT);
    const table: Array<[string, () => LivenessAction[]]> = [
      ['our own close (REQUESTED)', () => failedExtend(w, 0, 1, MIDDLE_A, 'REASON=REQUESTED')],
      ['a normal expiry (FINISHED)', () => failedExtend(w, 0, 2, MIDDLE_B, 'REASON=FINISHED')],
      ['our channel to the guard closed', () => failedExtend(w, 0, 3, MIDDLE_C, 'REASON=CHANNEL_CLOSED')],
      ['a remote close for a benign reason', () => failedExtend(w, 0, 4, MIDDLE_A, 'REASON=DESTROYED REMOTE_REASON=FINISHED')],
      ['a failure at the middle (one hop open)', () => {
        circ(w, 0, 5, 'LAUNCHED');
        return circ(w, 0, 5, 'FAILED', [GUARD], 'PURPOSE=GENERAL REASON=DESTROYED REMOTE_REASON=CONNECTFAILED');
      }],
      ['an internal circuit', () => {
        const internal = 'BUILD_FLAGS=IS_INTERNAL,NEED_CAPACITY PURPOSE=HS_VANGUARDS';
        circ(w, 0, 6, 'LAUNCHED', [], internal);
        circ(w, 0, 6, 'EXTENDED', [GUARD, MIDDLE_B], internal);
        return circ(w, 0, 6, 'FAILED', [GUARD, MIDDLE_B], `${internal} REASON=TIMEOUT`);
      }],
      ['a circuit listed before the pin (not launched under it)', () => circ(w, 0, 7, 'FAILED', [GUARD, MIDDLE_C], 'PURPOSE=GENERAL REASON=DESTROYED REMOTE_REASON=DESTROYED')],
      ['a built circuit through another exit', () => {
        circ(w, 0, 8, 'BUILT', [GUARD, MIDDLE_A, OTHER_EXIT]);
        return circ(w, 0, 8, 'CLOSED', [GUARD, MIDDLE_A, OTHER_EXIT], 'PURPOSE=GENERAL REASON=DESTROYED REMOTE_REASON=DESTROYED');
      }],
    ];
    for (const [what, run] of table) {
      expect(downOf(run()), what).to.equal(undefined);
      expect(w.pendingEvidence, what).to.deep.equal([]);
    }
    // And what does: tor's own build timeout while extending to the exit.
    failedExtend(w, 0, 9, MIDDLE_B, 'REASON=TIMEOUT');
    expect(w.pendingEvidence.map((e) => [e.kind, e.circuit])).to.deep.equal([['extend_failed', '9']]);
  });

  it('a new pin starts afresh; pinning the same relay again keeps what is known', () => {
    const w = new PinnedExitLiveness();
    w.pin(EXIT);
    failedExtend(w, 0, 1, MIDDLE_A);
    failedExtend(w, 0, 2, MIDDLE_B);
    w.pin(EXIT);
    expect(w.pendingEvidence.length).to.equal(2);
    w.pin(OTHER_EXIT);
    expect(w.pendingEvidence.length).to.equal(0);
    expect(downOf(failedExtend(w, 0, 3, MIDDLE_C))).to.equal(undefined);
  });

  it('probes within a budget per episode, and a stream timeout asks for one probe at most every interval', () => {
    const w = new PinnedExitLiveness({ ...EXIT_LIVENESS_LIMITS, evidence: 100 });
    w.pin(EXIT);
    let probes = 0;
    for (let id = 1; id <= 20; id++) probes += probesOf(failedExtend(w, id, id, id % 2 === 0 ? MIDDLE_A : MIDDLE_B));
    expect(probes).to.equal(EXIT_LIVENESS_LIMITS.probesPerEpisode);
    const v = new PinnedExitLiveness();
    v.pin(EXIT);
    expect(probesOf(v.onStreamTimeout(EXIT, 0))).to.equal(1);
    expect(probesOf(v.onStreamTimeout(EXIT, 1))).to.equal(0);
    expect(probesOf(v.onStreamTimeout(OTHER_EXIT, EXIT_LIVENESS_LIMITS.streamTimeoutProbeIntervalMs))).to.equal(0);
  });

  it('never declares a relay down on fewer pieces or middles than its limits, whatever the events (property)', () => {
    const middles = [MIDDLE_A, MIDDLE_B, MIDDLE_C];
    const event = fc.record({ middle: fc.integer({ min: 0, max: 2 }), outcome: fc.constantFrom('destroyed', 'timeout', 'built', 'requested'), gapMs: fc.integer({ min: 0, max: 20_000 }) });
    fc.assert(
      fc.property(fc.array(event, { maxLength: 30 }), (events) => {
        const w = new PinnedExitLiveness();
        w.pin(EXIT);
        let now = 0;
        let id = 0;
        for (const e of events) {
          now += e.gapMs;
          id += 1;
          const middle = middles[e.middle] as string;
          const before = [...w.pendingEvidence];
          let actions: LivenessAction[];
          if (e.outcome === 'built') {
            circ(w, now, id, 'LAUNCHED');
            actions = circ(w, now, id, 'BUILT', [GUARD, middle, EXIT]);
          } else {
            actions = failedExtend(w, now, id, middle, e.outcome === 'destroyed' ? 'REASON=DESTROYED REMOTE_REASON=CONNECTFAILED' : e.outcome === 'timeout' ? 'REASON=TIMEOUT' : 'REASON=REQUESTED');
          }
          const down = downOf(actions);
          if (down?.type === 'down') {
            const evidence = down.verdict.evidence;
            expect(evidence.length).to.be.at.least(EXIT_LIVENESS_LIMITS.evidence);
            expect(new Set(evidence.map((x) => x.middle)).size).to.be.at.least(EXIT_LIVENESS_LIMITS.middles);
            expect(evidence.every((x) => now - x.at < EXIT_LIVENESS_LIMITS.windowMs)).to.equal(true);
            expect(before.length + 1).to.equal(evidence.length);
            return;
          }
        }
      }),
      { numRuns: fuzzRuns(200) },
    );
  });
});

describe('tor: the stream-timeout notice in tor’s log', () => {
  it('names the exit that did not answer, and nothing else', () => {
    const line = `Nov 25 20:19:37.000 [notice] We tried for 10 seconds to connect to '[scrubbed]' using exit $${EXIT.toLowerCase()}~tnexit0 at 127.20.0.1. Retrying on a new circuit.`;
    expect(parseStreamTimeoutLogLine(line)).to.deep.equal({ exitFingerprint: EXIT });
    expect(parseStreamTimeoutLogLine(`Nov 25 20:19:37.000 [notice] We tried for 15 seconds to connect to 'example.com' using exit $${EXIT}=tnexit0 at 127.20.0.1. Retrying on a new circuit.`)).to.deep.equal({ exitFingerprint: EXIT });
    for (const other of [
      'Nov 25 20:19:37.000 [notice] Bootstrapped 100% (done): Done',
      `Nov 25 20:19:37.000 [notice] We tried for 10 seconds to connect to 'x' using exit *unnamed*. Retrying on a new circuit.`,
      `We tried for 10 seconds to connect to 'x' using exit $${EXIT}~n at 1.2.3.4.`,
    ]) {
      expect(parseStreamTimeoutLogLine(other), other).to.equal(undefined);
    }
  });
});
