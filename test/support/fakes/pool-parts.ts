import { EventEmitter } from 'node:events';
import type { HealthView } from '../../../shared/api/views.js';
import type { HealthSnapshot } from '../../../supervisor/health/health-snapshot.js';
import type { FailureKind, FailureOptions, FailureSource, HealthEvents, HealthTracker } from '../../../supervisor/health/health-tracker.js';
import type { ExitState, PoolInstance, PoolInstanceEvents, RotationPlan, RotationRequest } from '../../../supervisor/pool/pool-instance.js';
import type { ExitSteering } from '../../../supervisor/exits/exit-assignments.js';
import type { ExitRelay } from '../../../supervisor/exits/exit-relay.js';
import { loadConfig } from '../../../shared/config/index.js';
import { AuditLog } from '../../../supervisor/audit/audit-log.js';
import { Pool, type PoolDeps } from '../../../supervisor/pool/pool.js';
import { quietLogger } from './quiet-logger.js';

/** An exit as an instance knows it, with what a test does not care about left empty. */
export function fakeExit(exitIp: string, fields: Partial<ExitState> = {}): ExitState {
  return { exitIp, exitCountry: 'de', exitNickname: 'x', exitFingerprint: '', exitConfirmed: true, retiredExitIp: '', pinnedExit: '', rotating: false, ...fields };
}

/** An in-memory instance whose state a test sets directly. */
export class FakeInstance extends EventEmitter<PoolInstanceEvents> implements PoolInstance {
  readonly socksHost = '127.0.0.1';
  readonly socksPort: number;
  readonly socksPath: string | null = null;
  isReady = false;
  isRotating = false;
  isResponsive = true;
  started = false;
  stopped = false;
  rotations = 0;
  /** What each rotation asked for, oldest first. */
  rotationRequests: RotationRequest[] = [];
  restarts: boolean[] = [];
  /**
   * Exit assignments to ask, as TorPoolInstance does (fakePool's `steerInstances`): the first
   * exit when it becomes ready, the next one on every rotation (finishToAssigned lands on it).
   */
  steering: ExitSteering | null = null;
  /** The relay the running rotation heads for (steered instances). */
  heading: ExitRelay | null = null;
  /** Steered instances end each rotation on their own, a moment later, as a tor does (finishToAssigned). */
  autoFinish = false;
  exitInfo: ExitState = fakeExit('', { exitCountry: '', exitNickname: '', exitConfirmed: false });

  constructor(readonly id: number) {
    super();
    this.socksPort = 19050 + id * 2;
  }
  pid(): number | null {
    return this.started ? 1000 + this.id : null;
  }
  running(): boolean {
    return this.started && !this.stopped;
  }
  ready(): boolean {
    return this.isReady;
  }
  bootstrap(): number {
    return this.isReady ? 100 : 0;
  }
  uptimeSecs(): number {
    return 0;
  }
  rotating(): boolean {
    return this.isRotating;
  }
  responsive(): boolean {
    return this.isResponsive;
  }
  /** As a frozen process does: stops (or resumes) answering, with the matching event. */
  setResponsive(responsive: boolean): void {
    this.isResponsive = responsive;
    if (responsive) this.emit('responsive');
    else this.emit('unresponsive', 10_000);
  }
  exit(): ExitState {
    return this.exitInfo;
  }
  async start(): Promise<void> {
    this.started = true;
  }
  async stop(): Promise<void> {
    this.stopped = true;
  }
  async rotate(request: RotationRequest = { why: 'rotate' }): Promise<RotationPlan> {
    if (!this.isReady) {
      const e = new Error('not bootstrapped');
      e.name = 'NotBootstrappedError';
      throw e;
    }
    this.rotations += 1;
    this.rotationRequests.push(request);
    let plan: RotationPlan = { exit: '', shortage: '' };
    if (this.steering) {
      const next = this.steering.next(this.id, {
        fresh: true,
        why: request.why,
        ...(request.avoid || request.avoidDomains ? { avoid: { addresses: request.avoid ?? [], domains: request.avoidDomains ?? [] } } : {}),
        ...(request.countries ? { countries: request.countries } : {}),
      });
      this.heading = next.ok ? next.relay : null;
      plan = next.ok ? { exit: next.relay.fingerprint, shortage: next.note } : { exit: '', shortage: next.note };
    }
    this.isRotating = true;
    this.exitInfo = { ...this.exitInfo, retiredExitIp: this.exitInfo.exitIp, exitIp: '' };
    if (this.autoFinish) setImmediate(() => this.finishToAssigned());
    return plan;
  }
  /** A steered instance's rotation ends on the exit it was assigned (or where it was, when none was). */
  finishToAssigned(): void {
    if (!this.isRotating) return;
    const to = this.heading;
    this.heading = null;
    if (to) this.exitInfo = { ...this.exitInfo, exitFingerprint: to.fingerprint, exitCountry: to.country, exitNickname: to.nickname, pinnedExit: to.fingerprint };
    this.finishRotation(to ? to.address : this.exitInfo.retiredExitIp);
  }
  newCircuitCalls = 0;
  async newCircuit(): Promise<void> {
    this.newCircuitCalls += 1;
    await this.rotate();
  }
  async whenReady(): Promise<void> {
    if (!this.isReady) await new Promise<void>((resolve) => this.once('ready', () => resolve()));
  }
  async restart(wipe: boolean): Promise<void> {
    this.restarts.push(wipe);
    this.setReady(false);
  }
  /** As a tor whose pinned exit stopped answering does: the instance's own evidence that its exit is dead. */
  exitDied(fingerprint: string): void {
    this.emit('exit-down', { fingerprint, evidence: [{ kind: 'extend_failed', circuit: '1', middle: 'M'.repeat(40), reason: 'DESTROYED/CONNECTFAILED', at: 0 }] });
  }
  setReady(ready: boolean): void {
    this.isReady = ready;
    if (ready && this.steering && this.steering.current(this.id) === undefined) {
      const first = this.steering.next(this.id, { fresh: false, why: 'bootstrap' });
      if (first.ok) this.exitInfo = fakeExit(first.relay.address, { exitFingerprint: first.relay.fingerprint, exitCountry: first.relay.country, exitNickname: first.relay.nickname, pinnedExit: first.relay.fingerprint });
    }
    this.emit(ready ? 'ready' : 'unready');
  }
  finishRotation(ip: string): void {
    this.isRotating = false;
    this.exitInfo = { ...this.exitInfo, exitIp: ip, exitConfirmed: false, retiredExitIp: '' };
    this.emit('rotated');
  }
}

/** A health tracker that records calls; its state is set by the test. */
export class FakeHealth extends EventEmitter<HealthEvents> implements HealthTracker {
  state: HealthView['state'] = 'starting';
  failures: { kind: FailureKind; source: FailureSource; scored: boolean; mayQuarantine?: boolean }[] = [];
  successes = 0;

  view(): HealthView {
    return {
      state: this.state,
      failures_in_window: this.failures.length,
      consecutive_failures: 0,
      failure_score: this.failures.filter((f) => f.scored).length,
      quarantine_score: 5,
      transport_failures: this.failures.filter((f) => f.source === 'transport').length,
      client_failures: this.failures.filter((f) => f.source === 'client').length,
      failures_by_kind: {},
      remediations: 0,
      remediation_rung: 'none',
    };
  }
  routable(): boolean {
    return this.state === 'healthy' || this.state === 'degraded' || this.state === 'probation';
  }
  bootstrapped(): void {
    if (this.state === 'starting') this.state = 'healthy';
  }
  unbootstrapped(): void {
    this.state = 'starting';
  }
  failure(kind: FailureKind, source: FailureSource, scored: boolean, _now?: number, options: FailureOptions = {}): void {
    this.failures.push({ kind, source, scored, ...(options.mayQuarantine === undefined ? {} : { mayQuarantine: options.mayQuarantine }) });
  }
  /** How many times the pool said its exit died. */
  exitDowns = 0;
  exitDown(): void {
    this.exitDowns += 1;
    if (this.state !== 'probation') return;
    this.state = 'quarantined';
    this.emit('quarantine', 'probation');
  }
  /** Set by the test: whether the next failure would quarantine. */
  quarantinesNext = false;
  settled = 0;
  wouldQuarantine(): boolean {
    return this.quarantinesNext;
  }
  settledSites: string[] = [];
  settleSite(site: string): void {
    this.settled += 1;
    this.settledSites.push(site);
  }
  success(): void {
    this.successes += 1;
  }
  tick(): void {}
  rotationStarted(): void {}
  rotationEnded(): void {}
  quarantine(): boolean {
    if (!this.routable()) return false;
    this.state = 'quarantined';
    return true;
  }
  release(): void {
    this.state = 'healthy';
    this.failures = [];
  }
  stop(): void {}
  /** The snapshot restore() was given, if any. */
  restored: HealthSnapshot | null = null;
  persistable(): HealthSnapshot {
    return {
      state: this.state,
      window: [],
      sinceRelease: { transport: 0, client: 0, byKind: {} },
      remediations: 0,
      ladder: { rung: null, attemptsAtRung: 0, lastCompletedAt: null, active: false },
      pending: null,
    };
  }
  restore(snapshot: HealthSnapshot): void {
    this.restored = snapshot;
  }
  lifetime(): { transport: number; client: number; byKind: Record<string, number>; remediations: number } {
    return { transport: 0, client: 0, byKind: {}, remediations: 0 };
  }
}

/** A pool over FakeInstance and FakeHealth, started, with the fakes by instance id. */
export interface FakePool {
  pool: Pool;
  instances: Map<number, FakeInstance>;
  health: Map<number, FakeHealth>;
  audit: AuditLog;
}

/**
 * A pool of fakes configured by `env` on top of POOL_SIZE=4, no spawn stagger and no spares
 * (WARM_SPARES=0: a test of spares asks for them); every instance is ready unless `readyAll` is
 * false. With `steerInstances`, each instance asks `exits` for its exits (FakeInstance.steering).
 */
export function fakePool(env: Record<string, string> = {}, options: { readyAll?: boolean; steerInstances?: boolean } & Pick<PoolDeps, 'waitForListeners' | 'sendInvalidation' | 'now' | 'exits' | 'partyOf' | 'probeDestination'> = {}): FakePool {
  const instances = new Map<number, FakeInstance>();
  const health = new Map<number, FakeHealth>();
  const audit = new AuditLog();
  const pool = new Pool({
    config: loadConfig({ POOL_SIZE: '4', SPAWN_STAGGER: '0', WARM_SPARES: '0', ...env }),
    audit,
    log: quietLogger(),
    ...(options.waitForListeners === undefined ? {} : { waitForListeners: options.waitForListeners }),
    ...(options.sendInvalidation === undefined ? {} : { sendInvalidation: options.sendInvalidation }),
    ...(options.now === undefined ? {} : { now: options.now }),
    ...(options.exits === undefined ? {} : { exits: options.exits }),
    ...(options.partyOf === undefined ? {} : { partyOf: options.partyOf }),
    ...(options.probeDestination === undefined ? {} : { probeDestination: options.probeDestination }),
    createInstance: (id) => {
      const i = new FakeInstance(id);
      if (options.steerInstances && options.exits) {
        i.steering = options.exits;
        i.autoFinish = true;
      }
      instances.set(id, i);
      return i;
    },
    createHealth: (id) => {
      const h = new FakeHealth();
      health.set(id, h);
      return h;
    },
  });
  pool.start();
  if (options.readyAll ?? true) for (const i of instances.values()) i.setReady(true);
  return { pool, instances, health, audit };
}
