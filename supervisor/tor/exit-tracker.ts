import type { CircuitInfo, RelayHop, StreamInfo } from './control-events.js';

/**
 * Which exit relay an instance is using, worked out from CIRC and STREAM events alone (pure:
 * no I/O, no clock). The rules of the exit fields (docs/api.md, "Instance"):
 *
 *  - confirmed: a stream SUCCEEDED on a circuit, so traffic really left through that circuit's
 *    last hop. The latest such stream wins ("the first request through confirms or corrects").
 *  - inferred: with no confirmed exit, the newest standing BUILT exit circuit (or the pinned
 *    relay) is the probable exit. An inferred exit never replaces a confirmed one.
 *  - rotation: beginRotation() forgets the current exit and remembers it as retired;
 *    markNewnym() retires every circuit known so far (tor will not put new streams on them).
 *    The rotation is over as soon as a circuit first seen after the NEWNYM names an exit.
 *
 * Exit-bearing circuits are general-purpose (or conflux-linked) circuits that are not internal
 * and not one-hop directory tunnels.
 */

export interface CurrentExit {
  fingerprint: string;
  nickname?: string;
  confirmed: boolean;
}

interface TrackedCircuit {
  id: string;
  status: string;
  exit: RelayHop | undefined;
  exitBearing: boolean;
  /** Order in which circuits were first seen; compared with the NEWNYM epoch. */
  firstSeen: number;
  /** Order in which circuits reached BUILT; newest is the best inference. */
  builtOrder: number | undefined;
  /** Retired by a NEWNYM or a pin change: tor puts no new streams on it. */
  retired: boolean;
  closeRequested: boolean;
  streams: Set<string>;
}

const EXIT_PURPOSES = new Set(['GENERAL', 'CONFLUX_LINKED']);
const NON_EXIT_FLAGS = ['IS_INTERNAL', 'ONEHOP_TUNNEL'];
const ENDED_STREAM = new Set(['CLOSED', 'FAILED']);
const ENDED_CIRCUIT = new Set(['CLOSED', 'FAILED']);

/**
 * tor's own directory fetches (PURPOSE=DIR_FETCH, targets like `127.0.0.1.$FP.exit:port`) run
 * over one-hop tunnels and say nothing about the exit that carries user traffic.
 */
function isDirectoryStream(info: StreamInfo): boolean {
  if (info.purpose !== undefined) return info.purpose.startsWith('DIR');
  return /\.\$[0-9A-Fa-f]{40}\.exit(:\d+)?$/.test(info.target);
}

function isExitBearing(info: CircuitInfo): boolean {
  if (info.purpose !== undefined && !EXIT_PURPOSES.has(info.purpose)) return false;
  if (info.buildFlags.some((f) => NON_EXIT_FLAGS.includes(f))) return false;
  return info.path.length > 0;
}

export class ExitTracker {
  private circuits = new Map<string, TrackedCircuit>();
  /** stream id → circuit id ("0" while unattached) and whether it is tor's own directory traffic. */
  private streams = new Map<string, { circuitId: string; directory: boolean }>();
  private order = 0;
  private confirmed: CurrentExit | undefined;
  private pinnedFingerprint: string | undefined;
  private rotation: { retired: string | undefined; epoch: number | undefined } | undefined;
  /** While reseeding mid-rotation, listed circuits may predate the NEWNYM: they start retired. */
  private createRetired = false;
  /**
   * false while STREAM events are off (needsStreams()): which circuits carry streams is then
   * unknown, so no circuit is taken as idle (none is closed) until streams are listed again.
   */
  private streamsKnown = true;

  /** Forget everything (a new tor process). */
  reset(): void {
    this.circuits.clear();
    this.streams.clear();
    this.streamsKnown = true;
    this.confirmed = undefined;
    this.pinnedFingerprint = undefined;
    this.rotation = undefined;
  }

  /**
   * Replace circuit and stream knowledge with a fresh listing (after a control reconnect), keeping
   * the confirmed exit, the pin and any rotation in progress. Listed circuits count as first seen
   * now; if a rotation already sent its NEWNYM they are retired, since they might predate it.
   */
  reseed(circuits: readonly CircuitInfo[], streams: readonly StreamInfo[]): void {
    this.circuits.clear();
    this.createRetired = this.rotation?.epoch !== undefined;
    try {
      for (const c of circuits) this.onCircuit(c);
    } finally {
      this.createRetired = false;
    }
    this.reseedStreams(streams);
  }

  /**
   * Whether STREAM events can change what is known: the exit is not confirmed yet, a rotation
   * runs, a retired circuit still waits for its streams to end before it is closed, or a standing
   * circuit leaves through another relay than the confirmed exit (tor may put the next stream on
   * it). Otherwise every stream leaves through the confirmed exit and its events say nothing new
   * (the steady state of a pinned exit), and the caller may unsubscribe from them.
   */
  needsStreams(): boolean {
    return this.whyStreams() !== null;
  }

  /** Why STREAM events can still tell something (needsStreams), for the log; null when they cannot. */
  whyStreams(): string | null {
    const confirmed = this.confirmed;
    if (this.rotation !== undefined) return 'a rotation is running';
    if (confirmed === undefined) return 'no exit confirmed';
    for (const c of this.circuits.values()) {
      if (!c.exitBearing || c.closeRequested) continue;
      if (c.retired) return `retired circuit ${c.id} still carries streams`;
      if (c.status === 'BUILT' && c.exit !== undefined && c.exit.fingerprint !== confirmed.fingerprint) return `circuit ${c.id} is built through ${c.exit.fingerprint}, not the confirmed exit`;
    }
    return null;
  }

  /** STREAM events are off: the streams known so far would go stale. */
  forgetStreams(): void {
    this.streams.clear();
    for (const c of this.circuits.values()) c.streams.clear();
    this.streamsKnown = false;
  }

  /** STREAM events are on again (or a reconnect): the streams as tor lists them now (GETINFO stream-status). */
  reseedStreams(streams: readonly StreamInfo[]): void {
    this.forgetStreams();
    this.streamsKnown = true;
    for (const s of streams) this.onStream(s);
  }

  onCircuit(info: CircuitInfo): void {
    if (ENDED_CIRCUIT.has(info.status)) {
      this.circuits.delete(info.id);
      return;
    }
    let circuit = this.circuits.get(info.id);
    if (!circuit) {
      circuit = {
        id: info.id,
        status: info.status,
        exit: undefined,
        exitBearing: false,
        firstSeen: this.order++,
        builtOrder: undefined,
        retired: this.createRetired,
        closeRequested: false,
        streams: new Set(),
      };
      this.circuits.set(info.id, circuit);
    }
    circuit.status = info.status;
    circuit.exitBearing = isExitBearing(info);
    if (info.path.length > 0) circuit.exit = info.path[info.path.length - 1];
    if (info.status === 'BUILT' && circuit.builtOrder === undefined) {
      circuit.builtOrder = this.order++;
      // Streams not followed: tor may already carry traffic on this circuit, and its SUCCEEDED
      // event will not come. The confirmation no longer holds; the newest circuit is the inference.
      const other = circuit.exit !== undefined && this.confirmed !== undefined && circuit.exit.fingerprint !== this.confirmed.fingerprint;
      if (!this.streamsKnown && other && circuit.exitBearing && !circuit.retired) this.confirmed = undefined;
    }
    this.settleRotation();
  }

  /**
   * Returns whether the exit `current()` names may have changed (a stream confirmed an exit, or
   * ended a rotation): tor sends four or more stream events per request, and only these matter
   * to the exit, so the caller recomputes it only then.
   */
  onStream(info: StreamInfo): boolean {
    const previous = this.streams.get(info.id);
    if (previous !== undefined && previous.circuitId !== info.circuitId) this.circuits.get(previous.circuitId)?.streams.delete(info.id);
    if (ENDED_STREAM.has(info.status)) {
      this.streams.delete(info.id);
      this.circuits.get(info.circuitId)?.streams.delete(info.id);
      return false;
    }
    // PURPOSE comes with the first (NEW) event only; later events inherit it.
    const directory = previous?.directory ?? isDirectoryStream(info);
    const circuitId = info.status === 'DETACHED' ? '0' : info.circuitId;
    if (info.status === 'DETACHED') this.circuits.get(info.circuitId)?.streams.delete(info.id);
    this.streams.set(info.id, { circuitId, directory });
    const circuit = this.circuits.get(circuitId);
    circuit?.streams.add(info.id);
    if (info.status === 'SUCCEEDED' && !directory && circuit?.exit && circuit.exitBearing && this.namesCurrentExit(circuit)) {
      const same = this.rotation === undefined && this.confirmed?.fingerprint === circuit.exit.fingerprint && this.confirmed.nickname === circuit.exit.nickname;
      if (same) return false;
      const exit: CurrentExit = { fingerprint: circuit.exit.fingerprint, confirmed: true };
      if (circuit.exit.nickname) exit.nickname = circuit.exit.nickname;
      this.confirmed = exit;
      this.rotation = undefined;
      return true;
    }
    return false;
  }

  /** Retired circuits only finish old streams; mid-rotation, only circuits after the NEWNYM count. */
  private namesCurrentExit(circuit: TrackedCircuit): boolean {
    if (circuit.retired) return false;
    return this.rotation === undefined || this.rotation.epoch !== undefined;
  }

  /** The exit now in use, or undefined when it cannot be named (before bootstrap, mid-rotation). */
  current(): CurrentExit | undefined {
    if (this.rotation) return undefined;
    if (this.confirmed) return this.confirmed;
    if (this.pinnedFingerprint) return { fingerprint: this.pinnedFingerprint, confirmed: false };
    const best = this.newestUsableExitCircuit(undefined);
    if (!best?.exit) return undefined;
    const exit: CurrentExit = { fingerprint: best.exit.fingerprint, confirmed: false };
    if (best.exit.nickname) exit.nickname = best.exit.nickname;
    return exit;
  }

  get rotating(): boolean {
    return this.rotation !== undefined;
  }

  /** The exit a rotation discarded, while that rotation has not found a new one. */
  get retiredFingerprint(): string | undefined {
    return this.rotation?.retired;
  }

  get pinned(): string | undefined {
    return this.pinnedFingerprint;
  }

  /** Start of a rotation: the current exit becomes the retired one and nothing is current. */
  beginRotation(): void {
    if (this.rotation) return;
    this.rotation = { retired: this.current()?.fingerprint, epoch: undefined };
    this.confirmed = undefined;
  }

  /**
   * Called just before SIGNAL NEWNYM: every circuit seen so far is retired. A rotation started by
   * beginRotation() ends with the first exit named by a circuit seen after this point.
   */
  markNewnym(): void {
    for (const c of this.circuits.values()) c.retired = true;
    if (this.rotation) this.rotation.epoch = this.order;
    this.confirmed = undefined;
    this.settleRotation();
  }

  /**
   * A rotation to a pinned relay is over once the pin is in force: tor has abandoned its other
   * circuits, so every new stream leaves through the pinned exit (inferred until a stream confirms it).
   */
  settleOnPin(): void {
    if (this.rotation && this.pinnedFingerprint !== undefined) this.rotation = undefined;
  }

  /** Whether a standing BUILT circuit (not retired) leaves through `fingerprint`. */
  hasBuiltCircuitThrough(fingerprint: string): boolean {
    for (const c of this.circuits.values()) {
      if (c.exitBearing && !c.retired && c.status === 'BUILT' && c.exit?.fingerprint === fingerprint) return true;
    }
    return false;
  }

  /** Gives up a rotation (NEWNYM failed or took too long); whatever is known next becomes current. */
  abandonRotation(): void {
    this.rotation = undefined;
  }

  /** Lock inference to one relay (PIN_EXIT_RELAY); undefined releases the pin. */
  setPinned(fingerprint: string | undefined): void {
    this.pinnedFingerprint = fingerprint;
    if (fingerprint === undefined) return;
    // Circuits still being built are left alone: their last hop so far is not their exit.
    for (const c of this.circuits.values()) {
      if (c.status === 'BUILT' && c.exit?.fingerprint !== fingerprint) c.retired = true;
    }
    if (this.confirmed && this.confirmed.fingerprint !== fingerprint) this.confirmed = undefined;
  }

  /**
   * Retired exit-bearing circuits that carry no stream (in any state) and were not already asked
   * to close: what a rotation closes so that the next request cannot reuse an old circuit.
   * Marks them as requested.
   */
  takeRetiredIdleCircuits(): string[] {
    return this.takeIdle((c) => c.retired);
  }

  /** Standing exit circuits through another relay than `fingerprint` and without streams (pinning). */
  takeIdleCircuitsNotThrough(fingerprint: string): string[] {
    return this.takeIdle((c) => c.status === 'BUILT' && c.exit?.fingerprint !== fingerprint);
  }

  /** Number of streams tor reports on a circuit (tests and diagnostics). */
  streamCount(circuitId: string): number {
    return this.circuits.get(circuitId)?.streams.size ?? 0;
  }

  private takeIdle(select: (c: TrackedCircuit) => boolean): string[] {
    const ids: string[] = [];
    if (!this.streamsKnown) return ids;
    for (const c of this.circuits.values()) {
      if (!c.exitBearing || c.closeRequested || c.streams.size > 0 || !select(c)) continue;
      if (c.status !== 'BUILT' && c.status !== 'EXTENDED' && c.status !== 'LAUNCHED' && c.status !== 'GUARD_WAIT') continue;
      c.closeRequested = true;
      ids.push(c.id);
    }
    return ids;
  }

  private newestUsableExitCircuit(minFirstSeen: number | undefined): TrackedCircuit | undefined {
    let best: TrackedCircuit | undefined;
    for (const c of this.circuits.values()) {
      if (!c.exitBearing || c.retired || c.closeRequested || c.status !== 'BUILT' || c.builtOrder === undefined) continue;
      if (minFirstSeen !== undefined && c.firstSeen < minFirstSeen) continue;
      if (!best || c.builtOrder > best.builtOrder!) best = c;
    }
    return best;
  }

  /** A rotation whose NEWNYM is out ends as soon as a fresh circuit names an exit. */
  private settleRotation(): void {
    const epoch = this.rotation?.epoch;
    if (epoch === undefined) return;
    if (this.newestUsableExitCircuit(epoch)) this.rotation = undefined;
  }
}
