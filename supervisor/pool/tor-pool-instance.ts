import { EventEmitter } from 'node:events';
import type { ExitSteering } from '../exits/exit-assignments.js';
import type { ProbeRoute } from '../exits/egress-prober.js';
import { TorInstance } from '../tor/instance.js';
import type { RotationOutcome, TorInstanceOptions } from '../tor/instance-types.js';
import type { ExitState, PoolInstance, PoolInstanceEvents, RotationPlan, RotationRequest } from './pool-instance.js';

/** Exits tried in a row for a freshly bootstrapped instance before it serves on tor's own choice. */
const ASSIGN_ATTEMPTS = 3;
/**
 * Exits chosen again at bootstrap because the measured egress address shared a /24 (or family)
 * with another instance's while another exit would not: each costs a circuit and a probe, so
 * they are bounded too (then the instance serves on the last, said as a shortage).
 */
const EGRESS_RECHOICES = 3;

/**
 * The pool's view of one supervised tor (supervisor/tor/instance.ts): cached reads, and the
 * lifecycle events the pool and health need ('ready', 'unready', 'rotated'). With exit steering
 * (PIN_EXIT_RELAY), a bootstrapped tor is pinned to the exit the supervisor assigns before it
 * counts as ready, and every rotation moves it to a newly assigned exit.
 */
export class TorPoolInstance extends EventEmitter<PoolInstanceEvents> implements PoolInstance {
  readonly id: number;
  readonly socksHost = '127.0.0.1';
  readonly socksPort: number;
  readonly socksPath: string | null;
  readonly tor: TorInstance;
  /** This tor process runs on its assigned exit (or on tor's choice when none could be assigned). */
  private exitSettled = false;
  private settleRun = 0;

  constructor(
    options: TorInstanceOptions,
    private readonly steering?: ExitSteering,
  ) {
    super();
    this.id = options.index;
    this.tor = new TorInstance(steering ? { ...options, pinExitRelay: false } : options);
    const socks = this.tor.socksEndpoint;
    this.socksPath = socks.kind === 'unix' ? socks.path : null;
    this.socksPort = socks.kind === 'tcp' ? socks.port : (options.socksPort ?? 0);
    this.tor.on('ready', () => {
      if (this.steering) void this.settleExit(this.steering);
      else this.emit('ready');
    });
    this.tor.on('state', ({ lifecycle, previous }) => {
      if (previous !== 'ready' || lifecycle === 'ready') return;
      this.settleRun++;
      const wasReady = !this.steering || this.exitSettled;
      this.exitSettled = false;
      if (wasReady) this.emit('unready');
    });
    this.tor.on('exit-changed', () => this.emit('exit'));
    this.tor.on('exit-unreachable', ({ fingerprint }) => {
      this.steering?.unreachable(this.id, fingerprint);
      this.emit('exit-unreachable');
    });
    // Told before the rotation to that exit (if one runs) ends: the pool marks it down first, so
    // the next choice (settleExit's retry, the ladder's) already leaves it out.
    this.tor.on('exit-down', (verdict) => this.emit('exit-down', verdict));
    this.tor.on('unresponsive', ({ silentForMs }) => this.emit('unresponsive', silentForMs));
    this.tor.on('responsive', () => this.emit('responsive'));
  }

  /**
   * Pins a freshly bootstrapped tor to its assigned exit (the one it kept across a keep-state
   * restart, or a new one), trying another when no circuit through it can be built; then ready.
   */
  private async settleExit(steering: ExitSteering): Promise<void> {
    const run = ++this.settleRun;
    const stale = (): boolean => run !== this.settleRun || !this.tor.ready;
    try {
      await steering.ensureCatalog(this.id, (keys) => this.tor.getInfo(keys));
    } catch {
      // No catalog yet: the choice below finds none and the instance serves on tor's own exits.
    }
    let rechoices = 0;
    for (let attempt = 0; attempt < ASSIGN_ATTEMPTS && !stale(); attempt++) {
      const pinned = this.tor.exit.pinnedExit;
      // Only a tor that comes back already pinned (a keep-state restart) keeps its exit as it is:
      // after a pin made here failed, or was swapped for its address, the pin is this loop's own.
      if (attempt === 0 && rechoices === 0 && pinned !== '' && steering.current(this.id) === pinned) {
        // Kept across a keep-state restart: measured (when due) while it serves.
        this.measureEgress(pinned);
        break;
      }
      const again = attempt > 0 || rechoices > 0;
      const next = steering.next(this.id, { fresh: again, why: rechoices > 0 ? 'egress' : attempt > 0 ? 'retry' : 'bootstrap' });
      if (!next.ok) break;
      // At bootstrap the exit must be shown to work before the instance serves.
      const outcome = await this.tor.rotate(next.relay.fingerprint, { untilCircuit: true }).done;
      if (stale()) break;
      if (!outcome.ok) {
        if (outcome.reason === 'timeout') steering.unreachable(this.id, next.relay.fingerprint);
        continue;
      }
      // ... and its egress address known (within EGRESS_PROBE_TIMEOUT), so that exit_ip is what
      // sites see from the first request, and an exit that turns out to share a /24 is swapped
      // before anyone is served through it.
      const egress = await steering.egressPinned(this.id, next.relay.fingerprint, this.socksRoute(), true).catch(() => ({ keep: true }));
      if (stale() || egress.keep || rechoices >= EGRESS_RECHOICES) break;
      rechoices++;
      attempt--; // a re-choice is not a failed attempt
    }
    if (stale()) return;
    this.exitSettled = true;
    this.emit('ready');
  }

  pid(): number | null {
    return this.tor.pid ?? null;
  }
  running(): boolean {
    return this.tor.running;
  }
  ready(): boolean {
    return this.tor.ready && (!this.steering || this.exitSettled);
  }
  bootstrap(): number {
    return this.tor.bootstrap;
  }
  uptimeSecs(): number {
    return this.tor.uptimeSecs;
  }
  rotating(): boolean {
    return this.tor.rotating;
  }
  responsive(): boolean {
    return this.tor.responsive;
  }
  /**
   * tor's view of the exit, with the address sites see: tor knows only the relay's published
   * address; when a probe or the exit list found it leaves from another, exitIp and exitCountry
   * are that one's (supervisor/exits, "What sites see"). exitConfirmed still says a stream
   * confirmed the relay.
   */
  exit(): ExitState {
    const x = this.tor.exit;
    const egress = this.steering && x.exitFingerprint !== '' ? this.steering.egressOf(x.exitFingerprint) : undefined;
    if (!egress || (egress.address === x.exitIp && egress.country === x.exitCountry)) return x;
    return { ...x, exitIp: egress.address, exitCountry: egress.country };
  }

  /** Where a proxy worker dials this instance: its Unix SocksPort when it has one. */
  private socksRoute(): ProbeRoute {
    return { host: this.socksHost, port: this.socksPort, ...(this.socksPath !== null ? { path: this.socksPath } : {}) };
  }
  start(): Promise<void> {
    return this.tor.start();
  }
  stop(): Promise<void> {
    return this.tor.stop();
  }
  async rotate(request: RotationRequest = { why: 'rotate' }): Promise<RotationPlan> {
    const { target, plan } = this.planRotation(request);
    const ticket = this.tor.rotate(target); // throws NotBootstrappedError before bootstrap
    void ticket.done.then((outcome) => {
      this.rotationEnded(target, outcome);
      this.emit('rotated');
    });
    return plan;
  }
  async newCircuit(): Promise<void> {
    const { target } = this.planRotation({ why: 'ladder' });
    // A remediation rung ends on an exit known to work: probation follows it.
    const outcome = await this.tor.rotate(target, { untilCircuit: true }).done;
    this.rotationEnded(target, outcome);
    this.emit('rotated');
    if (!outcome.ok) throw new Error(`rotation ${outcome.reason}`);
  }
  restart(wipe: boolean): Promise<void> {
    return this.tor.restart({ wipe });
  }
  whenReady(timeoutMs: number): Promise<void> {
    return this.tor.whenReady(timeoutMs);
  }

  /** A rotation's exit: newly assigned (steering), or tor's NEWNYM when nothing else qualifies. */
  private planRotation(request: RotationRequest): { target: string | undefined; plan: RotationPlan } {
    if (!this.steering) return { target: undefined, plan: { exit: '', shortage: '' } };
    if (!this.tor.ready) return { target: undefined, plan: { exit: '', shortage: '' } }; // tor.rotate throws
    const next = this.steering.next(this.id, {
      fresh: true,
      why: request.why,
      ...(request.avoid || request.avoidDomains ? { avoid: { addresses: request.avoid ?? [], domains: request.avoidDomains ?? [] } } : {}),
      ...(request.session !== undefined ? { session: request.session } : {}),
      ...(request.countries !== undefined ? { countries: request.countries } : {}),
    });
    if (!next.ok) {
      // With no target tor's NEWNYM drops the pin and picks an exit anywhere, while the
      // assignment (and so the country placement reads) still names the old one: a session that
      // asked for countries would leave from outside them. Such a rotation stays on its exit.
      const kept = request.countries !== undefined ? this.steering.current(this.id) : undefined;
      return { target: kept, plan: { exit: '', shortage: next.note } };
    }
    return { target: next.relay.fingerprint, plan: { exit: next.relay.fingerprint, shortage: next.note } };
  }

  private rotationEnded(target: string | undefined, outcome: RotationOutcome): void {
    if (target !== undefined && !outcome.ok && outcome.reason === 'timeout') this.steering?.unreachable(this.id, target);
    // The instance serves at once; its new exit's address is measured meanwhile (when due) and,
    // should it share a /24 with another instance's, the instance is moved again.
    if (target !== undefined && outcome.ok) this.measureEgress(target);
  }

  /** Measures the pinned exit's egress in the background (a failure only leaves its address as it was). */
  private measureEgress(fingerprint: string): void {
    this.steering?.egressPinned(this.id, fingerprint, this.socksRoute(), false).catch(() => undefined);
  }
}
