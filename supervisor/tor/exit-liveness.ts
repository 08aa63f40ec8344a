import type { CircuitInfo, RelayHop } from './control-events.js';

/**
 * Whether the exit relay a tor is pinned to still answers, worked out from that tor's own
 * circuit events (pure: no I/O; the caller passes the time and carries out the actions). The
 * reasoning behind each number is in supervisor/exits/README.md, "Exits that die".
 *
 * With `ExitNodes $fp StrictNodes 1` every exit circuit tor builds ends at the pinned relay, so a
 * circuit that fails while extending from its middle relay to the third hop failed at the exit,
 * and a built circuit through the exit that the network destroys lost the exit or the middle.
 * One such failure is weak evidence (a middle relay can be the one in trouble, and a few
 * circuits in a hundred fail on a healthy network); several in a row, through different
 * middles, with no circuit through the exit built in between, are not. At the first sign the
 * watch asks tor for a few circuits of its own (probes), so the verdict comes in seconds
 * whether or not clients are sending traffic.
 */

/** Pieces of evidence, with no circuit through the exit built in between, that make the exit down. */
export const EXIT_DOWN_EVIDENCE = 3;
/** …through at least this many different middle relays: a middle that cannot reach the exit is the middle's trouble. */
export const EXIT_DOWN_MIDDLES = 2;
/** A circuit extending from its middle to the exit without an answer for this long counts as a failure. */
export const EXTEND_STALL_MS = 5_000;
/** Evidence older than this is forgotten: failures minutes apart say nothing about now. */
export const EXIT_EVIDENCE_WINDOW_MS = 60_000;
/** Circuits to the exit asked for at the first sign of trouble (and kept pending while the episode lasts). */
export const EXIT_PROBE_CIRCUITS = 2;
/** At most this many probe circuits per episode (from the first sign until the exit answers or is declared down). */
export const EXIT_PROBES_PER_EPISODE = 6;
/**
 * A stream timeout asks for one probe at most this often: a client that keeps dialling a
 * destination that never answers must not make the instance build circuits in a loop.
 */
export const STREAM_TIMEOUT_PROBE_INTERVAL_MS = EXTEND_STALL_MS;

export interface ExitLivenessLimits {
  evidence: number;
  middles: number;
  extendStallMs: number;
  windowMs: number;
  probeCircuits: number;
  probesPerEpisode: number;
  streamTimeoutProbeIntervalMs: number;
}

export const EXIT_LIVENESS_LIMITS: ExitLivenessLimits = Object.freeze({
  evidence: EXIT_DOWN_EVIDENCE,
  middles: EXIT_DOWN_MIDDLES,
  extendStallMs: EXTEND_STALL_MS,
  windowMs: EXIT_EVIDENCE_WINDOW_MS,
  probeCircuits: EXIT_PROBE_CIRCUITS,
  probesPerEpisode: EXIT_PROBES_PER_EPISODE,
  streamTimeoutProbeIntervalMs: STREAM_TIMEOUT_PROBE_INTERVAL_MS,
});

/**
 * - `circuit_destroyed`: a built circuit through the exit was destroyed by the network (REASON=DESTROYED with a
 *   REMOTE_REASON that says a connection broke or failed);
 * - `extend_failed`: a circuit failed while extending from its middle to the exit (a remote DESTROY, or tor's
 *   own build timeout);
 * - `extend_stalled`: a circuit has waited EXTEND_STALL_MS for the exit to answer its extension.
 */
export type ExitFailureKind = 'circuit_destroyed' | 'extend_failed' | 'extend_stalled';

export interface ExitFailure {
  kind: ExitFailureKind;
  circuit: string;
  /** Fingerprint of the relay before the exit on that circuit. */
  middle: string;
  /** tor's REASON (and REMOTE_REASON), or the stall. */
  reason: string;
  at: number;
}

/** The pinned exit does not answer: the evidence, oldest first. */
export interface ExitDownVerdict {
  fingerprint: string;
  evidence: readonly ExitFailure[];
}

export type LivenessAction = { type: 'probe'; circuits: number } | { type: 'down'; verdict: ExitDownVerdict };

/** What a relay destroying one of our circuits says when its connection towards the exit broke or could not be made. */
const EXIT_REMOTE_REASONS: ReadonlySet<string> = new Set([
  'CONNECTFAILED',
  'CHANNEL_CLOSED',
  'OR_CONN_CLOSED',
  'DESTROYED',
  'TIMEOUT',
  'OR_IDENTITY',
  'HIBERNATING',
  'RESOURCELIMIT',
]);
/** Our own reasons that mean the extension to the exit never completed. */
const EXTEND_TIMEOUT_REASONS: ReadonlySet<string> = new Set(['TIMEOUT', 'MEASUREMENT_EXPIRED']);
const EXIT_PURPOSES: ReadonlySet<string> = new Set(['GENERAL', 'CONFLUX_LINKED', 'CONFLUX_UNLINKED']);
const NON_EXIT_FLAGS = ['IS_INTERNAL', 'ONEHOP_TUNNEL'];

interface WatchedCircuit {
  /** First seen LAUNCHED after the pin: tor chose its exit under the pin. */
  launchedAfterPin: boolean;
  path: RelayHop[];
  /** When it reached its middle relay and began extending to the exit (while it has not answered). */
  extendingSince: number | undefined;
  /** Already counted as a stall: its later failure is not counted again. */
  stallCounted: boolean;
  built: boolean;
}

/** A circuit tor may put exit traffic on (not internal, not a directory tunnel), judged on its first event. */
function isExitCircuit(info: CircuitInfo): boolean {
  if (info.purpose !== undefined && !EXIT_PURPOSES.has(info.purpose)) return false;
  return !info.buildFlags.some((f) => NON_EXIT_FLAGS.includes(f));
}

function reasonText(info: CircuitInfo): string {
  return info.remoteReason === undefined ? (info.reason ?? '') : `${info.reason ?? ''}/${info.remoteReason}`;
}

export class PinnedExitLiveness {
  private pinned: string | undefined;
  private readonly circuits = new Map<string, WatchedCircuit>();
  private evidence: ExitFailure[] = [];
  private probesThisEpisode = 0;
  /** Probe circuits asked for whose LAUNCHED event has not arrived yet. */
  private probesRequested = 0;
  private declared = false;
  private streamProbeAt = Number.NEGATIVE_INFINITY;

  constructor(private readonly limits: ExitLivenessLimits = EXIT_LIVENESS_LIMITS) {}

  /** Whether the watched exit was declared down (once per pin, until a circuit through it is built). */
  get isDeclaredDown(): boolean {
    return this.declared;
  }

  /** Evidence held now (diagnostics and tests). */
  get pendingEvidence(): readonly ExitFailure[] {
    return this.evidence;
  }

  /** A new tor process, or the pin released: nothing is known. */
  reset(): void {
    this.pinned = undefined;
    this.forgetCircuits();
    this.endEpisode();
    this.declared = false;
  }

  /** Circuits will be listed afresh (a control reconnection): the ones known so far are not followed further. */
  forgetCircuits(): void {
    this.circuits.clear();
    this.probesRequested = 0;
  }

  /** tor is pinned to `fingerprint` from now on. Pinning the relay already watched keeps what is known of it. */
  pin(fingerprint: string | undefined): void {
    if (fingerprint === this.pinned) return;
    this.reset();
    this.pinned = fingerprint;
  }

  /**
   * Circuits tor lists after a control reconnection: followed from here on, without judging
   * them (a standing circuit was built once; that says nothing about now).
   */
  known(circuits: readonly CircuitInfo[]): void {
    for (const info of circuits) {
      if (info.status === 'CLOSED' || info.status === 'FAILED' || !isExitCircuit(info) || this.circuits.has(info.id)) continue;
      this.circuits.set(info.id, { launchedAfterPin: false, path: info.path, extendingSince: undefined, stallCounted: false, built: info.status === 'BUILT' });
    }
  }

  onCircuit(info: CircuitInfo, now: number): LivenessAction[] {
    const pinned = this.pinned;
    if (pinned === undefined) return [];
    let circuit = this.circuits.get(info.id);
    if (!circuit) {
      if (info.status === 'CLOSED' || info.status === 'FAILED' || !isExitCircuit(info)) return [];
      const launchedAfterPin = info.status === 'LAUNCHED';
      if (launchedAfterPin && this.probesRequested > 0) this.probesRequested--;
      circuit = { launchedAfterPin, path: [], extendingSince: undefined, stallCounted: false, built: false };
      this.circuits.set(info.id, circuit);
    }
    if (info.path.length > 0) circuit.path = info.path;
    const throughExit = circuit.path.length > 0 && circuit.path[circuit.path.length - 1]?.fingerprint === pinned;
    switch (info.status) {
      case 'BUILT':
        // Followed until it closes: the network destroying it later is evidence too.
        circuit.extendingSince = undefined;
        circuit.built = true;
        // The exit answered: whatever failed before was not the exit being down.
        if (throughExit) this.answered();
        return [];
      case 'CLOSED':
      case 'FAILED': {
        this.circuits.delete(info.id);
        const failure = circuit.stallCounted ? undefined : this.failureOf(info, circuit, throughExit, now);
        return failure ? this.add(failure, now) : this.decide(now);
      }
      default:
        if (circuit.launchedAfterPin && !throughExit && circuit.path.length >= 2) circuit.extendingSince ??= now;
        return [];
    }
  }

  /**
   * tor gave up waiting for a stream through the exit (its "We tried for N seconds to connect"
   * notice). Not evidence on its own (the destination may be the slow one), but a reason to
   * probe: a circuit to the exit tells at once whether it answers.
   */
  onStreamTimeout(exitFingerprint: string, now: number): LivenessAction[] {
    if (this.pinned === undefined || exitFingerprint !== this.pinned || this.declared) return [];
    if (now - this.streamProbeAt < this.limits.streamTimeoutProbeIntervalMs) return [];
    this.streamProbeAt = now;
    return this.probe(1);
  }

  /**
   * The tor itself was not answering (frozen, starved) until now: its circuits' silence meanwhile
   * says nothing about the exit, so every extension still waiting is timed afresh from `now`.
   */
  restartStallClocks(now: number): void {
    for (const c of this.circuits.values()) if (c.extendingSince !== undefined && !c.stallCounted) c.extendingSince = now;
  }

  /** Counts circuits that have waited EXTEND_STALL_MS for the exit; call it at nextDeadline(). */
  tick(now: number): LivenessAction[] {
    if (this.pinned === undefined) return [];
    const actions: LivenessAction[] = [];
    for (const [id, c] of this.circuits) {
      if (c.stallCounted || c.extendingSince === undefined || now - c.extendingSince < this.limits.extendStallMs) continue;
      c.stallCounted = true;
      const middle = c.path[c.path.length - 1]?.fingerprint ?? '';
      actions.push(...this.add({ kind: 'extend_stalled', circuit: id, middle, reason: `no answer from the exit in ${this.limits.extendStallMs} ms`, at: now }, now));
      if (this.declared) break;
    }
    return actions;
  }

  /** When tick() may next find a stalled extension; undefined when nothing is extending. */
  nextDeadline(): number | undefined {
    let next: number | undefined;
    for (const c of this.circuits.values()) {
      if (c.stallCounted || c.extendingSince === undefined) continue;
      const at = c.extendingSince + this.limits.extendStallMs;
      if (next === undefined || at < next) next = at;
    }
    return next;
  }

  private failureOf(info: CircuitInfo, circuit: WatchedCircuit, throughExit: boolean, now: number): ExitFailure | undefined {
    const path = circuit.path;
    const remote = info.reason === 'DESTROYED' && info.remoteReason !== undefined && EXIT_REMOTE_REASONS.has(info.remoteReason);
    if (throughExit) {
      if (!remote || path.length < 2) return undefined;
      return { kind: 'circuit_destroyed', circuit: info.id, middle: path[path.length - 2]?.fingerprint ?? '', reason: reasonText(info), at: now };
    }
    // Failed while extending from its middle to the exit (tor builds exit circuits of three hops).
    if (!circuit.launchedAfterPin || path.length < 2) return undefined;
    if (!remote && !EXTEND_TIMEOUT_REASONS.has(info.reason ?? '')) return undefined;
    return { kind: 'extend_failed', circuit: info.id, middle: path[path.length - 1]?.fingerprint ?? '', reason: reasonText(info), at: now };
  }

  private add(failure: ExitFailure, now: number): LivenessAction[] {
    if (this.declared) return [];
    this.evidence.push(failure);
    return this.decide(now);
  }

  /** Down once the evidence suffices; otherwise more probes while the episode lasts. */
  private decide(now: number): LivenessAction[] {
    const pinned = this.pinned;
    if (pinned === undefined || this.declared) return [];
    this.evidence = this.evidence.filter((e) => now - e.at < this.limits.windowMs);
    if (this.evidence.length === 0) {
      this.endEpisode();
      return [];
    }
    const middles = new Set(this.evidence.map((e) => e.middle));
    if (this.evidence.length >= this.limits.evidence && middles.size >= this.limits.middles) {
      this.declared = true;
      const verdict: ExitDownVerdict = { fingerprint: pinned, evidence: [...this.evidence] };
      this.endEpisode();
      return [{ type: 'down', verdict }];
    }
    return this.probe(this.limits.probeCircuits);
  }

  /** Keeps `circuits` circuits heading for the exit, within the episode's budget (EXIT_PROBES_PER_EPISODE). */
  private probe(circuits: number): LivenessAction[] {
    let pending = this.probesRequested;
    for (const c of this.circuits.values()) if (c.launchedAfterPin && !c.built && !c.stallCounted) pending++;
    const wanted = Math.min(circuits - pending, this.limits.probesPerEpisode - this.probesThisEpisode);
    if (wanted <= 0) return [];
    this.probesThisEpisode += wanted;
    this.probesRequested += wanted;
    return [{ type: 'probe', circuits: wanted }];
  }

  private answered(): void {
    this.declared = false;
    this.endEpisode();
  }

  private endEpisode(): void {
    this.evidence = [];
    this.probesThisEpisode = 0;
  }
}
