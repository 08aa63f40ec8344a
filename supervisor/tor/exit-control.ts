import { errorMessage } from '../../shared/errors/error-message.js';
import type { Logger } from '../../shared/logger.js';
import type { TorControlClient } from './control-client.js';
import { parseCircuitLine, parseStreamLine, type CircuitInfo, type StreamInfo } from './control-events.js';
import type { DelayScope } from './delay-scope.js';
import { ControlCommandError } from './errors.js';
import { PinnedExitLiveness, type ExitDownVerdict, type ExitLivenessLimits, type LivenessAction } from './exit-liveness.js';
import { ExitTracker } from './exit-tracker.js';
import type { ExitState, NewnymOutcome, RotationFailure, RotationOutcome, RotationTicket } from './instance-types.js';
import { NewnymCooldown } from './newnym-cooldown.js';
import { RelayDirectory } from './relay-directory.js';

/** After a failed SETCONF of a pin, the next attempt waits this long. */
const PIN_RETRY_MS = 5_000;
/**
 * STREAM events are switched off only after they said nothing new for this long, so that a
 * circuit change followed by a quick return does not make the subscription flap. Short, because
 * until then every stream costs the supervisor 4–5 events to parse on the cores its proxy worker
 * and tors need: at 5 s a fresh service's first bursts after its exits were confirmed still
 * carried them all (BENCH=cold-burst, docs/performance.md "A fresh service's first burst"). A
 * flap costs two control commands (SETEVENTS, then GETINFO stream-status when they come back),
 * and correctness does not depend on the length (supervisor/tor/README.md).
 */
export const STREAM_EVENTS_QUIET_MS = 500;
const STREAM_EVENT = 'STREAM';

const EMPTY_EXIT: ExitState = {
  exitIp: '',
  exitCountry: '',
  exitNickname: '',
  exitFingerprint: '',
  exitConfirmed: false,
  retiredExitIp: '',
  pinnedExit: '',
  rotating: false,
};

interface ActiveRotation {
  id: number;
  /** The relay to pin (an assignment), or undefined for NEWNYM within the configured selection. */
  target: string | undefined;
  /** With a target: end only once a circuit through it is built (it is known to work), not at the pin. */
  untilCircuit: boolean;
  ticket: RotationTicket;
  startedAt: number;
  sent: boolean;
  finished: boolean;
  timer: NodeJS.Timeout | undefined;
  resolveSent: (outcome: NewnymOutcome) => void;
  resolveDone: (outcome: RotationOutcome) => void;
}

/** Node-selection options as configured (torrc incl. extra lines), restored when a pin is released. */
interface NodeBaseline {
  exitNodes: string | undefined;
  excludeExitNodes: string | undefined;
  strictNodes: string | undefined;
}

/** What exit control needs of the instance whose tor it steers. */
export interface ExitControlHost {
  readonly log: Logger;
  /** Its waits are cancelled with the process's (stop, restart, death). */
  readonly delays: DelayScope;
  /** Identifies the current tor process: work started for an older one is dropped. */
  generation(): number;
  client(): TorControlClient | undefined;
  ready(): boolean;
  running(): boolean;
  exitChanged(exit: ExitState): void;
  /** No circuit through the pinned relay was built within the rotation timeout after it was pinned. */
  pinUnreachable?(fingerprint: string): void;
  /** The pinned relay does not answer (exit-liveness.ts): told once per pin, before a rotation to it ends. */
  exitDown?(verdict: ExitDownVerdict): void;
}

export interface ExitControlOptions {
  /** The events every control connection subscribes at its handshake (STREAM among them). */
  events: readonly string[];
  pinExitRelay: boolean;
  rotationTimeoutMs: number;
  newnymCooldownMs?: number;
  /** The pinned exit's liveness watch (tests use shorter limits); default EXIT_LIVENESS_LIMITS. */
  livenessLimits?: ExitLivenessLimits;
}

/**
 * One tor's exit: which relay it leaves through (from CIRC/STREAM events and the relay
 * directory), rotation (NEWNYM within tor's cooldown, until a new exit is known) and pinning
 * (SETCONF ExitNodes to one relay, and back to the configured selection). Its state is cached,
 * so `exit` is a plain read; its control commands run in the background.
 */
export class ExitControl {
  private directory: RelayDirectory;
  private readonly tracker = new ExitTracker();
  private readonly cooldown: NewnymCooldown;
  private rotation: ActiveRotation | undefined;
  private rotationIds = 0;
  private pinnedFingerprint: string | undefined;
  private pinInFlight = false;
  private pinRetryAt = 0;
  private baseline: NodeBaseline | undefined;
  private lastExit: ExitState = EMPTY_EXIT;
  /**
   * STREAM events on the current control connection: each request costs tor 4–5 of them and
   * the supervisor their parsing, so they are on only while they can change the exit
   * (ExitTracker.needsStreams). Every (re)connection subscribes them at its handshake.
   */
  private streamEvents: 'on' | 'off' | 'switching' = 'on';
  private streamsQuietSince: number | undefined;
  private streamEventCount = 0;
  /** After a pin: until a circuit through the relay is built (or the rotation timeout says it cannot be). */
  private pinWatch: { fingerprint: string; timer: NodeJS.Timeout } | undefined;
  /** Whether the pinned relay still answers, from this tor's circuit events and probes. */
  private readonly liveness: PinnedExitLiveness;
  /** Wakes the liveness watch when a circuit extending to the exit may have stalled. */
  private livenessTimer: NodeJS.Timeout | undefined;
  /** The tor does not answer its control port: no stall is counted against the exit meanwhile. */
  private livenessSuspended = false;

  constructor(
    private readonly host: ExitControlHost,
    private readonly options: ExitControlOptions,
  ) {
    this.cooldown = new NewnymCooldown(options.newnymCooldownMs);
    this.directory = this.newDirectory();
    this.liveness = new PinnedExitLiveness(options.livenessLimits);
  }

  get exit(): ExitState {
    return this.lastExit;
  }

  get rotating(): boolean {
    return this.rotation !== undefined;
  }

  /** Milliseconds until a NEWNYM would take effect at once (0 = now). */
  newnymCooldownMs(now: number): number {
    return this.cooldown.msUntilAllowed(now);
  }

  /** A new tor process: nothing known of its circuits, relays, rate limit or configuration yet. */
  newProcess(): void {
    this.tracker.reset();
    this.directory.clear();
    this.directory = this.newDirectory();
    this.cooldown.reset();
    this.baseline = undefined;
    this.liveness.reset();
  }

  /** The process is gone (stopped, restarting, dead): its circuits with it; a rotation ends with `reason`. */
  processGone(reason: RotationFailure): void {
    this.tracker.reset();
    this.unwatchPin();
    this.liveness.reset();
    this.disarmLiveness();
    this.livenessSuspended = false;
    if (this.rotation) this.finishRotation(this.rotation, { ok: false, reason });
  }

  /** The DataDirectory was wiped: a new identity has no pinned exit. */
  forgetPin(): void {
    this.pinnedFingerprint = undefined;
  }

  /** After every control (re)connection: the configured selection once, then circuits and streams, then the pin again. */
  async syncAfterConnect(client: TorControlClient, generation: number): Promise<void> {
    if (!this.baseline) {
      const conf = await client.getConf(['ExitNodes', 'ExcludeExitNodes', 'StrictNodes']);
      if (generation !== this.host.generation()) return;
      this.baseline = {
        exitNodes: conf.get('ExitNodes'),
        excludeExitNodes: conf.get('ExcludeExitNodes'),
        strictNodes: conf.get('StrictNodes'),
      };
    }
    // The handshake of this connection subscribed STREAM events again.
    this.streamEvents = 'on';
    this.streamsQuietSince = undefined;
    const lists = await client.getInfo(['circuit-status', 'stream-status']);
    if (generation !== this.host.generation()) return;
    const circuits = parseLines(lists.get('circuit-status') ?? '', parseCircuitLine);
    this.tracker.reseed(circuits, parseLines(lists.get('stream-status') ?? '', parseStreamLine));
    this.liveness.forgetCircuits();
    this.liveness.known(circuits);
    if (this.pinnedFingerprint) await this.applyPin(client, this.pinnedFingerprint);
  }

  onCircuit(event: CircuitInfo): void {
    this.tracker.onCircuit(event);
    if (this.pinWatch && this.tracker.hasBuiltCircuitThrough(this.pinWatch.fingerprint)) this.unwatchPin();
    this.closeIdleCircuits();
    this.refresh();
    this.carryOut(this.liveness.onCircuit(event, Date.now()));
  }

  /** The tor stopped answering its control port (liveness-probe.ts): its silence is not the exit's. */
  suspendLiveness(): void {
    this.livenessSuspended = true;
    this.disarmLiveness();
  }

  /** It answers again: extensions still waiting are timed afresh. */
  resumeLiveness(): void {
    this.livenessSuspended = false;
    this.liveness.restartStallClocks(Date.now());
    this.armLiveness();
  }

  /** tor gave up waiting for a stream through `exitFingerprint` (its log says so): a reason to probe the exit. */
  onStreamTimeout(exitFingerprint: string): void {
    this.carryOut(this.liveness.onStreamTimeout(exitFingerprint, Date.now()));
  }

  onStream(event: StreamInfo): void {
    this.streamEventCount++;
    const exitMayHaveChanged = this.tracker.onStream(event);
    const ended = event.status === 'CLOSED' || event.status === 'FAILED';
    if (ended) this.closeIdleCircuits();
    if (exitMayHaveChanged) this.refresh();
    else if (ended) this.tuneStreamEvents();
  }

  /**
   * Starts a rotation, or returns the one running. The caller checked that tor is ready. With
   * `target`, tor is pinned to that relay (no NEWNYM: SETCONF of ExitNodes abandons every
   * circuit by itself), and a running rotation to another target is superseded.
   */
  rotate(target?: string, untilCircuit = false): RotationTicket {
    if (this.rotation && (target === undefined || this.rotation.target === target)) return this.rotation.ticket;
    if (this.rotation) this.finishRotation(this.rotation, { ok: false, reason: 'failed', error: new Error('superseded by a new exit assignment') });
    let resolveSent!: (outcome: NewnymOutcome) => void;
    let resolveDone!: (outcome: RotationOutcome) => void;
    const ticket: RotationTicket = {
      id: ++this.rotationIds,
      newnymSent: new Promise<NewnymOutcome>((r) => (resolveSent = r)),
      done: new Promise<RotationOutcome>((r) => (resolveDone = r)),
    };
    const rotation: ActiveRotation = {
      id: ticket.id,
      target,
      untilCircuit,
      ticket,
      startedAt: Date.now(),
      sent: false,
      finished: false,
      timer: undefined,
      resolveSent,
      resolveDone,
    };
    this.rotation = rotation;
    this.tracker.beginRotation();
    this.host.log.info('rotation started', { rotation: rotation.id, ...(target ? { target } : { cooldownMs: this.cooldown.msUntilAllowed(Date.now()) }) });
    this.refresh();
    void this.performRotation(rotation, this.host.generation());
    return ticket;
  }

  /** Recomputes the exit from the tracker and the relay cache; tells the host when it changed. */
  refresh(): void {
    const next = this.computeExit();
    const rotation = this.rotation;
    if (rotation && rotation.sent && next.exitIp !== '') {
      this.finishRotation(rotation, { ok: true, exit: { ...next, rotating: false } });
      return; // finishRotation refreshed with the rotation cleared
    }
    if (!sameExit(next, this.lastExit)) {
      this.lastExit = next;
      this.host.exitChanged(next);
    }
    this.maybePin(next);
    this.tuneStreamEvents();
  }

  /** Whether STREAM events are subscribed now, and how many arrived so far (diagnostics and tests). */
  get streamEventsState(): { following: boolean; received: number } {
    return { following: this.streamEvents !== 'off', received: this.streamEventCount };
  }

  /**
   * Subscribes STREAM events when the tracker needs them, at once, and unsubscribes once it has
   * not needed them for STREAM_EVENTS_QUIET_MS. Off the request path: nothing waits for it.
   */
  private tuneStreamEvents(): void {
    if (this.streamEvents === 'switching') return;
    const client = this.host.client();
    if (!client?.connected) return;
    const wanted = this.tracker.needsStreams();
    if (wanted) this.streamsQuietSince = undefined;
    if (this.streamEvents === 'off') {
      if (wanted) {
        this.host.log.debug('stream events wanted again', { why: this.tracker.whyStreams() });
        void this.switchStreamEvents(client, true);
      }
      return;
    }
    if (wanted) return;
    const now = Date.now();
    this.streamsQuietSince ??= now;
    if (now - this.streamsQuietSince >= STREAM_EVENTS_QUIET_MS) void this.switchStreamEvents(client, false);
  }

  private async switchStreamEvents(client: TorControlClient, on: boolean): Promise<void> {
    const generation = this.host.generation();
    const current = (): boolean => generation === this.host.generation() && client === this.host.client();
    this.streamEvents = 'switching';
    const events = on ? this.options.events : this.options.events.filter((e) => e !== STREAM_EVENT);
    try {
      await client.command(`SETEVENTS ${events.join(' ')}`);
      if (!current()) return;
      if (on) {
        // Streams that began while the events were off: which circuits carry them, and their exits.
        const lists = await client.getInfo(['stream-status']);
        if (!current()) return;
        this.tracker.reseedStreams(parseLines(lists.get('stream-status') ?? '', parseStreamLine));
      } else {
        this.tracker.forgetStreams();
      }
      this.streamEvents = on ? 'on' : 'off';
      this.host.log.debug(on ? 'stream events on: the exit may change' : 'stream events off: every circuit leaves through the confirmed exit');
    } catch (error) {
      // The subscription is as it was (a reconnect subscribes everything again).
      if (current()) this.streamEvents = on ? 'off' : 'on';
      this.host.log.debug('SETEVENTS failed', { error: errorMessage(error) });
      return;
    } finally {
      this.streamsQuietSince = undefined;
    }
    if (on) {
      this.closeIdleCircuits();
      this.refresh();
    } else {
      this.tuneStreamEvents();
    }
  }

  private newDirectory(): RelayDirectory {
    return new RelayDirectory((keys) => {
      const client = this.host.client();
      if (!client) return Promise.reject(new Error('no control connection'));
      return client.getInfo(keys);
    });
  }

  private closeIdleCircuits(): void {
    const client = this.host.client();
    if (!client) return;
    const ids = this.tracker.takeRetiredIdleCircuits();
    if (this.pinnedFingerprint) ids.push(...this.tracker.takeIdleCircuitsNotThrough(this.pinnedFingerprint));
    for (const id of ids) {
      client.closeCircuit(id).catch((error: Error) => {
        // 552 Unknown circuit: it closed by itself meanwhile.
        if (!(error instanceof ControlCommandError)) this.host.log.debug('CLOSECIRCUIT failed', { circuit: id, error: error.message });
      });
    }
  }

  private async performRotation(rotation: ActiveRotation, generation: number): Promise<void> {
    const current = (): boolean => !rotation.finished && generation === this.host.generation();
    try {
      if (rotation.target !== undefined) {
        const client = this.host.client();
        if (!client) throw new Error('no control connection');
        // Retire first: every circuit seen from here on is one tor built after the change.
        this.tracker.markNewnym();
        await this.applyPin(client, rotation.target);
        if (!current()) return;
        // Every new stream now leaves through the target: the rotation ends as soon as its address
        // is known, without waiting the second or so tor takes to build a circuit through it; a
        // relay through which none can be built is reported (pinUnreachable) instead.
        if (!rotation.untilCircuit) {
          this.tracker.settleOnPin();
          this.watchPin(rotation.target, generation);
        }
        this.markSent(rotation);
        return;
      }
      const waitMs = this.cooldown.msUntilAllowed(Date.now());
      if (waitMs > 0 && !(await this.host.delays.wait(waitMs))) return;
      if (!current()) return;
      const client = this.host.client();
      if (!client) throw new Error('no control connection');
      if (this.pinnedFingerprint) await this.releasePin(client, this.pinnedFingerprint);
      if (!current()) return;
      this.tracker.markNewnym();
      await client.signal('NEWNYM');
      this.cooldown.markSent(Date.now());
      if (!current()) return;
      this.markSent(rotation);
    } catch (error) {
      this.host.log.warn('rotation failed', { rotation: rotation.id, error: errorMessage(error) });
      this.finishRotation(rotation, { ok: false, reason: 'failed', error: error instanceof Error ? error : new Error(errorMessage(error)) });
    }
  }

  /** Probes the exit, or reports it down; then waits for the next possible stall. */
  private carryOut(actions: readonly LivenessAction[]): void {
    for (const action of actions) {
      if (action.type === 'probe') this.launchProbes(action.circuits);
      else this.exitFoundDown(action.verdict);
    }
    this.armLiveness();
  }

  private launchProbes(count: number): void {
    const client = this.host.client();
    if (!client?.connected) return;
    for (let i = 0; i < count; i++) {
      client.launchCircuit().catch((error: unknown) => this.host.log.debug('probe circuit not launched', { error: errorMessage(error) }));
    }
    this.host.log.info('probing the pinned exit', { fingerprint: this.pinnedFingerprint, circuits: count, evidence: this.liveness.pendingEvidence.length });
  }

  private exitFoundDown(verdict: ExitDownVerdict): void {
    if (verdict.fingerprint !== this.pinnedFingerprint) return;
    if (this.pinWatch?.fingerprint === verdict.fingerprint) this.unwatchPin();
    this.host.log.warn('the pinned exit does not answer: down', {
      fingerprint: verdict.fingerprint,
      evidence: verdict.evidence.map((e) => `${e.kind} via ${e.middle.slice(0, 8)} (${e.reason})`),
    });
    this.host.exitDown?.(verdict);
    const rotation = this.rotation;
    if (rotation?.target === verdict.fingerprint) this.finishRotation(rotation, { ok: false, reason: 'exit-down' });
  }

  private armLiveness(): void {
    this.disarmLiveness();
    if (this.livenessSuspended) return;
    const at = this.liveness.nextDeadline();
    if (at === undefined) return;
    const generation = this.host.generation();
    this.livenessTimer = setTimeout(() => {
      this.livenessTimer = undefined;
      if (generation !== this.host.generation()) return;
      this.carryOut(this.liveness.tick(Date.now()));
    }, Math.max(0, at - Date.now()));
    this.livenessTimer.unref();
  }

  private disarmLiveness(): void {
    clearTimeout(this.livenessTimer);
    this.livenessTimer = undefined;
  }

  private watchPin(fingerprint: string, generation: number): void {
    this.unwatchPin();
    if (this.tracker.hasBuiltCircuitThrough(fingerprint)) return;
    const timer = setTimeout(() => {
      this.pinWatch = undefined;
      if (generation !== this.host.generation() || this.pinnedFingerprint !== fingerprint) return;
      if (this.tracker.hasBuiltCircuitThrough(fingerprint)) return;
      this.host.log.warn('no circuit through the pinned exit', { fingerprint, waitedMs: this.options.rotationTimeoutMs });
      this.host.pinUnreachable?.(fingerprint);
    }, this.options.rotationTimeoutMs);
    timer.unref();
    this.pinWatch = { fingerprint, timer };
  }

  private unwatchPin(): void {
    if (this.pinWatch) clearTimeout(this.pinWatch.timer);
    this.pinWatch = undefined;
  }

  /** The change went out (NEWNYM or the new pin): the rotation now waits for a circuit that names its exit. */
  private markSent(rotation: ActiveRotation): void {
    const at = Date.now();
    rotation.sent = true;
    rotation.resolveSent({ ok: true, at, waitedMs: at - rotation.startedAt });
    rotation.timer = setTimeout(() => this.finishRotation(rotation, { ok: false, reason: 'timeout' }), this.options.rotationTimeoutMs);
    this.closeIdleCircuits();
    this.refresh();
  }

  private finishRotation(rotation: ActiveRotation, outcome: RotationOutcome): void {
    if (rotation.finished) return;
    rotation.finished = true;
    clearTimeout(rotation.timer);
    if (this.rotation === rotation) this.rotation = undefined;
    if (!outcome.ok) this.tracker.abandonRotation();
    if (!rotation.sent) rotation.resolveSent(outcome.ok ? { ok: true, at: Date.now(), waitedMs: 0 } : outcome);
    this.host.log.info('rotation finished', {
      rotation: rotation.id,
      ok: outcome.ok,
      ...(outcome.ok ? { exit: outcome.exit.exitIp } : { reason: outcome.reason }),
      ms: Date.now() - rotation.startedAt,
    });
    rotation.resolveDone(outcome);
    this.refresh();
  }

  /** SETCONF that locks tor to one exit and restores the configured exclusions. */
  private async applyPin(client: TorControlClient, fingerprint: string): Promise<void> {
    await client.setConf([
      ['ExitNodes', `$${fingerprint}`],
      ['StrictNodes', '1'],
      ['ExcludeExitNodes', this.baseline?.excludeExitNodes ?? ''],
    ]);
    this.pinnedFingerprint = fingerprint;
    this.tracker.setPinned(fingerprint);
    this.liveness.pin(fingerprint);
    this.host.log.info('exit pinned', { fingerprint });
    this.closeIdleCircuits();
    this.refresh();
  }

  /** Back to the configured exit selection, with the old relay excluded so a new exit is chosen. */
  private async releasePin(client: TorControlClient, fingerprint: string): Promise<void> {
    const exclude = [this.baseline?.excludeExitNodes, `$${fingerprint}`].filter((v): v is string => !!v).join(',');
    await client.setConf([
      ['ExitNodes', this.baseline?.exitNodes ?? ''],
      ['StrictNodes', this.baseline?.strictNodes ?? ''],
      ['ExcludeExitNodes', exclude],
    ]);
    this.pinnedFingerprint = undefined;
    this.tracker.setPinned(undefined);
    this.liveness.pin(undefined);
    this.disarmLiveness();
    this.host.log.info('exit pin released', { fingerprint });
  }

  private maybePin(current: ExitState): void {
    if (!this.options.pinExitRelay || this.pinnedFingerprint || this.rotation || this.pinInFlight) return;
    if (!this.host.ready() || current.exitFingerprint === '' || Date.now() < this.pinRetryAt) return;
    const client = this.host.client();
    if (!client?.connected) return;
    const generation = this.host.generation();
    this.pinInFlight = true;
    this.applyPin(client, current.exitFingerprint)
      .catch((error: Error) => {
        this.pinRetryAt = Date.now() + PIN_RETRY_MS;
        this.host.log.warn('pinning the exit failed', { error: error.message });
      })
      .finally(() => {
        this.pinInFlight = false;
        if (generation === this.host.generation()) this.refresh();
      });
  }

  private computeExit(): ExitState {
    if (!this.host.running()) return EMPTY_EXIT;
    const current = this.tracker.current();
    const info = current ? this.resolveRelay(current.fingerprint) : undefined;
    const state: ExitState = { ...EMPTY_EXIT, pinnedExit: this.pinnedFingerprint ?? '', rotating: this.rotation !== undefined };
    if (current && info) {
      state.exitIp = info.address;
      state.exitCountry = info.country;
      state.exitNickname = info.nickname;
      state.exitFingerprint = current.fingerprint;
      state.exitConfirmed = current.confirmed;
    }
    const retired = this.rotation ? this.tracker.retiredFingerprint : undefined;
    if (state.exitIp === '' && retired) {
      const retiredInfo = this.resolveRelay(retired);
      if (retiredInfo) state.retiredExitIp = retiredInfo.address;
    }
    return state;
  }

  /** Cached relay info, or undefined while a lookup runs (it refreshes the exit when done). */
  private resolveRelay(fingerprint: string): { address: string; country: string; nickname: string } | undefined {
    const hit = this.directory.cached(fingerprint);
    if (hit) return hit;
    if (!this.host.client()?.connected) return undefined;
    const generation = this.host.generation();
    this.directory
      .resolve(fingerprint)
      .then(() => {
        if (generation === this.host.generation()) this.refresh();
      })
      .catch((error: Error) => this.host.log.debug('relay lookup failed', { fingerprint, error: error.message }));
    return undefined;
  }
}

function parseLines<T>(text: string, parse: (line: string) => T): T[] {
  const out: T[] = [];
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    try {
      out.push(parse(line));
    } catch {
      // One odd line must not hide the others.
    }
  }
  return out;
}

function sameExit(a: ExitState, b: ExitState): boolean {
  return (
    a.exitIp === b.exitIp &&
    a.exitCountry === b.exitCountry &&
    a.exitNickname === b.exitNickname &&
    a.exitFingerprint === b.exitFingerprint &&
    a.exitConfirmed === b.exitConfirmed &&
    a.retiredExitIp === b.retiredExitIp &&
    a.pinnedExit === b.pinnedExit &&
    a.rotating === b.rotating
  );
}
