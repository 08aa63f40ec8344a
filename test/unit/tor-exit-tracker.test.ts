import { expect } from 'chai';
import fc from 'fast-check';
import { fuzzRuns } from '../support/fixtures/fuzz-runs.js';
import { parseCircuitLine, parseStreamLine } from '../../supervisor/tor/control-events.js';
import { ExitTracker } from '../../supervisor/tor/exit-tracker.js';

const GUARD = '1'.repeat(40);
const MIDDLE = '2'.repeat(40);
const EXIT_A = 'A'.repeat(40);
const EXIT_B = 'B'.repeat(40);
const EXIT_C = 'C'.repeat(40);

function circ(tracker: ExitTracker, id: number, status: string, exit?: string, extra = 'PURPOSE=GENERAL'): void {
  const path = exit ? ` $${GUARD}~g,$${MIDDLE}~m,$${exit}~x${exit[0]}` : '';
  tracker.onCircuit(parseCircuitLine(`${id} ${status}${path} ${extra}`));
}

function stream(tracker: ExitTracker, id: number, status: string, circuit: number): void {
  tracker.onStream(parseStreamLine(`${id} ${status} ${circuit} 127.0.0.1:8080`));
}

describe('tor exit tracker', () => {
  it('knows no exit before any circuit is built', () => {
    const t = new ExitTracker();
    expect(t.current()).to.equal(undefined);
    circ(t, 1, 'LAUNCHED');
    circ(t, 1, 'EXTENDED', EXIT_A);
    expect(t.current()).to.equal(undefined);
  });

  it('infers the exit from the newest standing BUILT general circuit', () => {
    const t = new ExitTracker();
    circ(t, 1, 'BUILT', EXIT_A);
    expect(t.current()).to.deep.equal({ fingerprint: EXIT_A, nickname: 'xA', confirmed: false });
    circ(t, 2, 'BUILT', EXIT_B);
    expect(t.current()?.fingerprint).to.equal(EXIT_B);
    circ(t, 2, 'CLOSED', EXIT_B);
    expect(t.current()?.fingerprint).to.equal(EXIT_A);
  });

  it('ignores internal, one-hop and non-general circuits', () => {
    const t = new ExitTracker();
    circ(t, 1, 'BUILT', EXIT_A, 'BUILD_FLAGS=IS_INTERNAL,NEED_CAPACITY PURPOSE=GENERAL');
    circ(t, 2, 'BUILT', EXIT_B, 'BUILD_FLAGS=ONEHOP_TUNNEL PURPOSE=GENERAL');
    circ(t, 3, 'BUILT', EXIT_C, 'PURPOSE=HS_CLIENT_REND');
    expect(t.current()).to.equal(undefined);
    circ(t, 4, 'BUILT', EXIT_C, 'PURPOSE=CONFLUX_LINKED');
    expect(t.current()?.fingerprint).to.equal(EXIT_C);
  });

  it('confirms the exit of the circuit that carried a stream; an inference never replaces it', () => {
    const t = new ExitTracker();
    circ(t, 1, 'BUILT', EXIT_A);
    circ(t, 2, 'BUILT', EXIT_B);
    stream(t, 10, 'NEW', 0);
    stream(t, 10, 'SENTCONNECT', 1);
    expect(t.current()).to.deep.equal({ fingerprint: EXIT_B, nickname: 'xB', confirmed: false });
    stream(t, 10, 'SUCCEEDED', 1);
    expect(t.current()).to.deep.equal({ fingerprint: EXIT_A, nickname: 'xA', confirmed: true });
    circ(t, 3, 'BUILT', EXIT_C);
    expect(t.current()?.fingerprint).to.equal(EXIT_A);
    // The first request through corrects it.
    stream(t, 11, 'SUCCEEDED', 3);
    expect(t.current()).to.deep.equal({ fingerprint: EXIT_C, nickname: 'xC', confirmed: true });
  });

  it("is not confirmed by tor's own directory streams on one-hop tunnels", () => {
    const t = new ExitTracker();
    t.onCircuit(parseCircuitLine(`1 BUILT $${GUARD}~auth BUILD_FLAGS=ONEHOP_TUNNEL,IS_INTERNAL,NEED_CAPACITY PURPOSE=GENERAL`));
    const target = `127.0.0.1.$${GUARD}.exit:20114`;
    t.onStream(parseStreamLine(`6 NEW 0 ${target} PURPOSE=DIR_FETCH`));
    t.onStream(parseStreamLine(`6 SENTCONNECT 1 ${target}`));
    t.onStream(parseStreamLine(`6 SUCCEEDED 1 ${target}`));
    expect(t.current()).to.equal(undefined);
    // Even without the NEW event (stream-status after a reconnect), the .exit target gives it away.
    circ(t, 2, 'BUILT', EXIT_A, 'BUILD_FLAGS=NEED_CAPACITY PURPOSE=GENERAL');
    t.onStream(parseStreamLine(`7 SUCCEEDED 2 127.0.0.2.$${MIDDLE}.exit:20116`));
    expect(t.current()).to.deep.include({ fingerprint: EXIT_A, confirmed: false });
    t.onStream(parseStreamLine('8 SUCCEEDED 2 whoami.testnet:80'));
    expect(t.current()).to.deep.include({ fingerprint: EXIT_A, confirmed: true });
  });

  it('counts streams in any state on a circuit and forgets closed or detached ones', () => {
    const t = new ExitTracker();
    circ(t, 1, 'BUILT', EXIT_A);
    stream(t, 10, 'SENTCONNECT', 1);
    stream(t, 11, 'SUCCEEDED', 1);
    expect(t.streamCount('1')).to.equal(2);
    stream(t, 10, 'DETACHED', 1);
    expect(t.streamCount('1')).to.equal(1);
    stream(t, 11, 'CLOSED', 1);
    expect(t.streamCount('1')).to.equal(0);
  });

  it('onStream says when the exit may have changed: never silent about a change, quiet on the routine events', () => {
    const t = new ExitTracker();
    circ(t, 1, 'BUILT', EXIT_A);
    const onStream = (id: number, status: string, circuit: number): boolean => t.onStream(parseStreamLine(`${id} ${status} ${circuit} 127.0.0.1:8080`));
    expect(onStream(10, 'NEW', 0)).to.equal(false);
    expect(onStream(10, 'SENTCONNECT', 1)).to.equal(false);
    expect(onStream(10, 'SUCCEEDED', 1), 'the first confirmation').to.equal(true);
    expect(onStream(10, 'CLOSED', 1)).to.equal(false);
    expect(onStream(11, 'SUCCEEDED', 1), 'the same exit confirmed again').to.equal(false);
    // Property: whenever current() differs after an event, the event said so.
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            fc.record({ kind: fc.constant('circ' as const), id: fc.integer({ min: 1, max: 4 }), status: fc.constantFrom('BUILT', 'CLOSED', 'FAILED'), exit: fc.constantFrom(EXIT_A, EXIT_B, EXIT_C) }),
            fc.record({ kind: fc.constant('stream' as const), id: fc.integer({ min: 1, max: 6 }), status: fc.constantFrom('NEW', 'SENTCONNECT', 'SUCCEEDED', 'CLOSED', 'FAILED', 'DETACHED'), circuit: fc.integer({ min: 0, max: 4 }) }),
            fc.constant({ kind: 'rotate' as const }),
          ),
          { maxLength: 40 },
        ),
        (events) => {
          const tracker = new ExitTracker();
          for (const e of events) {
            if (e.kind === 'circ') circ(tracker, e.id, e.status, e.exit);
            else if (e.kind === 'rotate') {
              tracker.beginRotation();
              tracker.markNewnym();
            } else {
              const before = JSON.stringify(tracker.current() ?? null);
              const said = tracker.onStream(parseStreamLine(`${e.id} ${e.status} ${e.circuit} 127.0.0.1:8080`));
              if (JSON.stringify(tracker.current() ?? null) !== before) expect(said, `${e.status} on ${e.circuit}`).to.equal(true);
            }
          }
        },
      ),
      { numRuns: fuzzRuns(200) },
    );
  });

  describe('rotation', () => {
    function rotated(): ExitTracker {
      const t = new ExitTracker();
      circ(t, 1, 'BUILT', EXIT_A);
      stream(t, 10, 'SUCCEEDED', 1);
      circ(t, 2, 'BUILT', EXIT_B);
      circ(t, 3, 'BUILT', EXIT_C);
      stream(t, 11, 'SENTCONNECT', 3);
      return t;
    }

    it('clears the exit and names the retired one until a new exit is known', () => {
      const t = rotated();
      t.beginRotation();
      expect(t.rotating).to.equal(true);
      expect(t.current()).to.equal(undefined);
      expect(t.retiredFingerprint).to.equal(EXIT_A);
      // Circuits built while waiting for the NEWNYM cooldown do not end the rotation.
      circ(t, 4, 'BUILT', EXIT_B);
      expect(t.current()).to.equal(undefined);
      t.markNewnym();
      expect(t.rotating).to.equal(true);
      circ(t, 5, 'LAUNCHED');
      circ(t, 5, 'BUILT', EXIT_C);
      expect(t.rotating).to.equal(false);
      expect(t.current()).to.deep.equal({ fingerprint: EXIT_C, nickname: 'xC', confirmed: false });
      expect(t.retiredFingerprint).to.equal(undefined);
    });

    it('closes old exit circuits that carry no stream, never one with a stream in any state', () => {
      const t = rotated();
      t.beginRotation();
      t.markNewnym();
      // 1 carries a succeeded stream, 3 a connecting one; 2 is idle.
      expect(t.takeRetiredIdleCircuits()).to.deep.equal(['2']);
      expect(t.takeRetiredIdleCircuits()).to.deep.equal([]);
      stream(t, 10, 'CLOSED', 1);
      expect(t.takeRetiredIdleCircuits()).to.deep.equal(['1']);
      // A circuit launched before the NEWNYM that completes afterwards is old, too.
      const u = new ExitTracker();
      circ(u, 1, 'BUILT', EXIT_A);
      circ(u, 2, 'LAUNCHED');
      u.beginRotation();
      u.markNewnym();
      expect(u.takeRetiredIdleCircuits()).to.deep.equal(['1']);
      circ(u, 2, 'BUILT', EXIT_B);
      expect(u.rotating).to.equal(true);
      expect(u.takeRetiredIdleCircuits()).to.deep.equal(['2']);
    });

    it('is not confirmed by a stream finishing on an old circuit, but by one on a new circuit', () => {
      const t = rotated();
      t.beginRotation();
      t.markNewnym();
      stream(t, 11, 'SUCCEEDED', 3);
      expect(t.current()).to.equal(undefined);
      circ(t, 6, 'EXTENDED', EXIT_B);
      stream(t, 12, 'SENTCONNECT', 6);
      circ(t, 6, 'BUILT', EXIT_B);
      stream(t, 12, 'SUCCEEDED', 6);
      expect(t.current()).to.deep.equal({ fingerprint: EXIT_B, nickname: 'xB', confirmed: true });
    });

    it('can be abandoned; old circuits stay retired', () => {
      const t = rotated();
      t.beginRotation();
      t.markNewnym();
      t.abandonRotation();
      expect(t.rotating).to.equal(false);
      expect(t.current()).to.equal(undefined);
      circ(t, 7, 'BUILT', EXIT_B);
      expect(t.current()?.fingerprint).to.equal(EXIT_B);
    });

    it('retires listed circuits on a reseed after the NEWNYM went out', () => {
      const t = rotated();
      t.beginRotation();
      t.markNewnym();
      t.reseed([parseCircuitLine(`9 BUILT $${GUARD},$${MIDDLE},$${EXIT_B} PURPOSE=GENERAL`)], []);
      expect(t.rotating).to.equal(true);
      expect(t.takeRetiredIdleCircuits()).to.deep.equal(['9']);
    });
  });

  describe('pinning', () => {
    it('names the pinned relay and closes idle built circuits through other exits', () => {
      const t = new ExitTracker();
      circ(t, 1, 'BUILT', EXIT_A);
      circ(t, 2, 'BUILT', EXIT_B);
      stream(t, 10, 'SUCCEEDED', 2);
      circ(t, 3, 'EXTENDED', MIDDLE);
      t.setPinned(EXIT_A);
      expect(t.current()).to.deep.equal({ fingerprint: EXIT_A, confirmed: false });
      expect(t.takeIdleCircuitsNotThrough(EXIT_A)).to.deep.equal([]); // 2 carries a stream, 3 still building
      stream(t, 10, 'CLOSED', 2);
      expect(t.takeIdleCircuitsNotThrough(EXIT_A)).to.deep.equal(['2']);
      stream(t, 11, 'SUCCEEDED', 1);
      expect(t.current()).to.deep.include({ fingerprint: EXIT_A, confirmed: true });
      t.setPinned(undefined);
      expect(t.pinned).to.equal(undefined);
    });
  });

  it('property: mid-rotation nothing is current, a retired exit exists only mid-rotation, idle-close never takes a circuit with streams', () => {
    const action = fc.oneof(
      fc.record({ kind: fc.constant('circ' as const), id: fc.integer({ min: 1, max: 6 }), status: fc.constantFrom('LAUNCHED', 'EXTENDED', 'BUILT', 'CLOSED'), exit: fc.constantFrom(EXIT_A, EXIT_B, EXIT_C) }),
      fc.record({ kind: fc.constant('stream' as const), id: fc.integer({ min: 10, max: 14 }), status: fc.constantFrom('NEW', 'SENTCONNECT', 'SUCCEEDED', 'DETACHED', 'CLOSED', 'FAILED'), circuit: fc.integer({ min: 0, max: 6 }) }),
      fc.record({ kind: fc.constantFrom('begin' as const, 'newnym' as const, 'abandon' as const, 'close' as const) }),
    );
    fc.assert(
      fc.property(fc.array(action, { maxLength: 60 }), (actions) => {
        const t = new ExitTracker();
        for (const a of actions) {
          if (a.kind === 'circ') circ(t, a.id, a.status, a.status === 'LAUNCHED' ? undefined : a.exit);
          else if (a.kind === 'stream') stream(t, a.id, a.status, a.circuit);
          else if (a.kind === 'begin') t.beginRotation();
          else if (a.kind === 'newnym') t.markNewnym();
          else if (a.kind === 'abandon') t.abandonRotation();
          else for (const id of t.takeRetiredIdleCircuits()) expect(t.streamCount(id)).to.equal(0);
          if (t.rotating) expect(t.current()).to.equal(undefined);
          else expect(t.retiredFingerprint).to.equal(undefined);
        }
      }),
      { numRuns: fuzzRuns(500) },
    );
  });
});

/** Circuit 1 through EXIT_A confirmed by stream 10, then STREAM events switched off. */
function confirmedThenUnfollowed(): ExitTracker {
  const t = new ExitTracker();
  circ(t, 1, 'BUILT', EXIT_A);
  stream(t, 10, 'SUCCEEDED', 1);
  t.forgetStreams();
  return t;
}

describe('tor exit tracker: when STREAM events are needed', () => {
  it('needs them until an exit is confirmed, then not while every standing circuit leaves through it', () => {
    const t = new ExitTracker();
    expect(t.needsStreams(), 'nothing known').to.equal(true);
    expect(t.whyStreams()).to.equal('no exit confirmed');
    circ(t, 1, 'BUILT', EXIT_A);
    expect(t.needsStreams(), 'inferred only').to.equal(true);
    stream(t, 10, 'SENTCONNECT', 1);
    stream(t, 10, 'SUCCEEDED', 1);
    expect(t.needsStreams(), 'confirmed, one circuit').to.equal(false);
    circ(t, 2, 'EXTENDED', EXIT_B);
    expect(t.needsStreams(), 'a circuit still being built').to.equal(false);
    circ(t, 2, 'BUILT', EXIT_B);
    expect(t.needsStreams(), 'a standing circuit through another exit').to.equal(true);
    expect(t.whyStreams(), 'the log says which').to.match(/^circuit 2 is built through \S+, not the confirmed exit$/);
    circ(t, 2, 'CLOSED', EXIT_B);
    circ(t, 3, 'BUILT', EXIT_A);
    expect(t.needsStreams(), 'a second circuit through the same exit').to.equal(false);
    circ(t, 4, 'BUILT', EXIT_C, 'BUILD_FLAGS=ONEHOP_TUNNEL PURPOSE=GENERAL');
    expect(t.needsStreams(), 'a directory tunnel says nothing about the exit').to.equal(false);
  });

  it('needs them through a rotation and while a retired circuit waits for its streams to end', () => {
    const t = new ExitTracker();
    circ(t, 1, 'BUILT', EXIT_A);
    stream(t, 10, 'SUCCEEDED', 1);
    expect(t.needsStreams()).to.equal(false);
    t.beginRotation();
    expect(t.needsStreams(), 'rotating').to.equal(true);
    expect(t.whyStreams()).to.equal('a rotation is running');
    t.markNewnym();
    circ(t, 2, 'BUILT', EXIT_B);
    expect(t.rotating).to.equal(false);
    expect(t.takeRetiredIdleCircuits(), 'circuit 1 carries stream 10').to.deep.equal([]);
    stream(t, 11, 'SUCCEEDED', 2);
    expect(t.needsStreams(), 'retired circuit 1 still carries a stream').to.equal(true);
    expect(t.whyStreams()).to.equal('retired circuit 1 still carries streams');
    stream(t, 10, 'CLOSED', 1);
    expect(t.takeRetiredIdleCircuits()).to.deep.equal(['1']);
    expect(t.needsStreams(), 'circuit 1 asked to close').to.equal(false);
    expect(t.whyStreams()).to.equal(null);
  });

  it('closes no circuit as idle while streams are not followed, and knows them again from a listing', () => {
    const t = confirmedThenUnfollowed();
    t.beginRotation();
    t.markNewnym();
    expect(t.takeRetiredIdleCircuits(), 'streams unknown: circuit 1 may carry one').to.deep.equal([]);
    t.reseedStreams([parseStreamLine('12 SUCCEEDED 1 127.0.0.1:8080')]);
    expect(t.takeRetiredIdleCircuits(), 'stream 12 is on it').to.deep.equal([]);
    t.reseedStreams([]);
    expect(t.takeRetiredIdleCircuits()).to.deep.equal(['1']);
  });

  it('while streams are not followed, a new circuit through another relay ends the confirmation: it is the inference until a stream confirms', () => {
    const t = confirmedThenUnfollowed();
    circ(t, 2, 'BUILT', EXIT_A);
    expect(t.current(), 'same relay: still confirmed').to.deep.equal({ fingerprint: EXIT_A, nickname: 'xA', confirmed: true });
    circ(t, 3, 'BUILT', EXIT_B);
    expect(t.current(), 'tor may be using it already').to.deep.equal({ fingerprint: EXIT_B, nickname: 'xB', confirmed: false });
    t.reseedStreams([parseStreamLine('14 SUCCEEDED 1 127.0.0.1:8080')]);
    expect(t.current()).to.deep.equal({ fingerprint: EXIT_A, nickname: 'xA', confirmed: true });
  });

  it('confirms an exit from a listed stream that succeeded while events were off', () => {
    const t = confirmedThenUnfollowed();
    circ(t, 2, 'BUILT', EXIT_B);
    expect(t.needsStreams()).to.equal(true);
    t.reseedStreams([parseStreamLine('13 SUCCEEDED 2 127.0.0.1:8080')]);
    expect(t.current()).to.deep.equal({ fingerprint: EXIT_B, nickname: 'xB', confirmed: true });
  });
});
