import { EventEmitter } from 'node:events';
import type { HealthState, HealthView } from '../../shared/api/views.js';
import type { Config } from '../../shared/config/index.js';
import { childLogger, type Logger } from '../../shared/logger.js';
import { errorMessage } from '../../shared/errors/error-message.js';
import type { FailureKind, FailureOptions, FailureSource } from '../../shared/health/failure-kind.js';
import { systemClock, type HealthClock } from './health-clock.js';
import {
  healthView,
  initialHealthState,
  isRoutableState,
  reduceHealth,
  type HealthConfig,
  type HealthEffect,
  type HealthEvent,
  type HealthMachineState,
} from './health-machine.js';
import type { RemediationPlan } from './remediation-ladder.js';
import { restoreHealth, snapshotHealth, type HealthSnapshot } from './health-snapshot.js';
import type { HealthEvents, HealthTracker } from './health-tracker.js';
import {
  DEFAULT_ACTION_TIMEOUT_MS,
  RemediationExecutor,
  defaultReadyTimeoutMs,
  type RemediationActions,
  type RemediationTimeouts,
  type RungOutcome,
} from './remediation-executor.js';

export type InstanceHealthConfig = HealthConfig & Pick<Config, 'bootstrapStallTimeoutMs'>;

export interface InstanceHealthOptions {
  id: number;
  config: InstanceHealthConfig;
  actions: RemediationActions;
  clock?: HealthClock;
  timeouts?: Partial<RemediationTimeouts>;
  log?: Logger;
}


/** Monotonic counters for the metrics (pool_instance_failures_total and friends). */
export interface HealthLifetime {
  /** Failures by source, scored or not. */
  transport: number;
  client: number;
  byKind: Record<string, number>;
  remediations: number;
  /** Failures not held against the instance (private destinations, rotation windows). */
  unscored: number;
}

/**
 * The health of one instance: failure window, state machine and remediation ladder, with the
 * executor that runs the ladder's rungs. Every method takes effect synchronously; only the
 * rungs run in the background, and their outcomes come back as machine events.
 * Call tick(now) periodically (the pool does every second) so the window slides without traffic.
 */
export class InstanceHealth extends EventEmitter<HealthEvents> implements HealthTracker {
  readonly id: number;
  private s: HealthMachineState;
  private readonly config: InstanceHealthConfig;
  private readonly clock: HealthClock;
  private readonly executor: RemediationExecutor;
  private readonly log: Logger;
  /** Bumped whenever a rung is launched or abandoned, so a stale outcome is dropped. */
  private generation = 0;
  private stopped = false;
  /** The rung launched last and when its delay ends (the durable state resumes it after a restart). */
  private pending: { plan: RemediationPlan; dueAt: number } | null = null;
  /** A rung restored from the durable state, launched at the first bootstrap. */
  private resumeAtBootstrap: { plan: RemediationPlan; dueAt: number } | null = null;

  constructor(options: InstanceHealthOptions) {
    super();
    this.id = options.id;
    this.config = options.config;
    this.clock = options.clock ?? systemClock;
    this.log = options.log ?? childLogger({ instance: options.id });
    this.s = initialHealthState(options.config);
    this.executor = new RemediationExecutor(options.actions, this.clock, {
      actionTimeoutMs: options.timeouts?.actionTimeoutMs ?? DEFAULT_ACTION_TIMEOUT_MS,
      readyTimeoutMs: options.timeouts?.readyTimeoutMs ?? defaultReadyTimeoutMs(options.config.bootstrapStallTimeoutMs),
    });
  }

  get state(): HealthState {
    return this.s.state;
  }

  /** The machine's full state, for diagnostics and tests. */
  snapshot(): HealthMachineState {
    return this.s;
  }

  view(): HealthView {
    return healthView(this.s);
  }

  /** What the durable state keeps of this instance's health. */
  persistable(): HealthSnapshot {
    return snapshotHealth(this.s, this.pending ?? this.resumeAtBootstrap);
  }

  /**
   * Begins from what the durable state kept (before the instance starts). A rung under way
   * resumes once the new process has bootstrapped (its actions need a running tor), with what
   * was left of its delay then.
   */
  restore(snapshot: HealthSnapshot): void {
    const now = this.clock.now();
    const { state, resume } = restoreHealth(snapshot, this.config, now);
    this.s = state;
    this.resumeAtBootstrap = resume ? { plan: resume, dueAt: now + resume.delayMs } : null;
  }

  /** healthy, degraded or probation. */
  routable(): boolean {
    return isRoutableState(this.s.state);
  }

  bootstrapped(now: number): void {
    this.dispatch({ type: 'bootstrapped' }, now);
    const resume = this.resumeAtBootstrap;
    this.resumeAtBootstrap = null;
    if (resume && (this.s.state === 'quarantined' || this.s.state === 'remediating')) {
      const plan = { ...resume.plan, delayMs: Math.max(0, resume.dueAt - now) };
      this.log.info('remediation resumes after the restart', { rung: plan.rung, attempt: plan.attempt, delay_ms: plan.delayMs });
      this.launch(plan);
    }
  }

  /** The process died or restarts outside a remediation: back to starting unless mid-remediation. */
  unbootstrapped(now: number): void {
    this.dispatch({ type: 'unbootstrapped' }, now);
  }

  /** scored=false for failures that are not the exit's fault (a private destination). */
  failure(kind: FailureKind, source: FailureSource, scored: boolean, now: number, options: FailureOptions = {}): void {
    this.dispatch({ type: 'failure', kind, source, scored, ...options }, now);
  }

  /** Its current exit was found dead by the pool's own evidence: on probation that quarantines it. */
  exitDown(now: number): void {
    this.dispatch({ type: 'exitDown' }, now);
  }

  /** Whether this failure would take the instance out of service now; nothing changes. */
  wouldQuarantine(kind: FailureKind, source: FailureSource, scored: boolean, now: number): boolean {
    return this.s.state !== 'quarantined' && reduceHealth(this.s, { type: 'failure', kind, source, scored }, now, this.config).state.state === 'quarantined';
  }

  /** The complaints about `site` have been answered without a quarantine (a site ban): they weigh nothing more; the rest stays. */
  settleSite(site: string, now: number): void {
    this.dispatch({ type: 'siteSettled', site }, now);
  }

  /** endedAt: when the connection ended (it may be reported a batch later). */
  success(now: number, endedAt?: number): void {
    this.dispatch({ type: 'success', ...(endedAt === undefined ? {} : { endedAt }) }, now);
  }

  tick(now: number): void {
    this.dispatch({ type: 'tick' }, now);
  }

  /** Manual quarantine. false when the state does not allow it (starting, quarantined, remediating): 409. */
  quarantine(now: number): boolean {
    return this.dispatch({ type: 'manualQuarantine' }, now).refused === undefined;
  }

  /** Clears quarantine (cancelling a remediation), the window, the counts and the ladder. */
  release(now: number): void {
    this.dispatch({ type: 'release' }, now);
  }

  /** Failures from now until rotationEnded + ROTATION_GRACE are not scored. */
  rotationStarted(now: number): void {
    this.dispatch({ type: 'rotationStarted' }, now);
  }

  rotationEnded(now: number): void {
    this.dispatch({ type: 'rotationEnded' }, now);
  }

  /** Cancels a waiting or running rung and starts no other. */
  stop(): void {
    this.stopped = true;
    this.generation++;
    this.executor.cancel();
  }

  lifetime(): HealthLifetime {
    return {
      transport: this.s.lifetime.transport,
      client: this.s.lifetime.client,
      byKind: this.s.lifetime.byKind(),
      remediations: this.s.remediations,
      unscored: this.s.unscored,
    };
  }

  private dispatch(event: HealthEvent, now: number): { refused?: { reason: string } } {
    const before = this.s;
    const transition = reduceHealth(before, event, now, this.config);
    this.s = transition.state;
    if (before.state !== this.s.state) {
      // healthy <-> degraded follows every first failure and every emptied window: debug only.
      const routine = isRoutableState(before.state) && before.state !== 'probation' && isRoutableState(this.s.state) && this.s.state !== 'probation';
      this.log.log(routine ? 'debug' : 'info', 'health state changed', { from: before.state, to: this.s.state, event: event.type });
      this.hook(() => this.emit('state', { from: before.state, to: this.s.state }));
    }
    for (const effect of transition.effects) this.apply(effect);
    return transition.refused ? { refused: transition.refused } : {};
  }

  private apply(effect: HealthEffect): void {
    switch (effect.type) {
      case 'moveSessions':
        this.hook(() => this.emit('quarantine', effect.cause));
        break;
      case 'audit': {
        const { type, message, details } = effect.audit;
        this.log.info(message, { audit: type, ...details });
        this.hook(() => this.emit('audit', { type, message: `instance ${this.id} ${message}`, details }));
        break;
      }
      case 'startRemediation':
        this.launch(effect.plan);
        break;
      case 'cancelRemediation':
        this.generation++;
        this.executor.cancel();
        break;
    }
  }

  private launch(plan: RemediationPlan): void {
    if (this.stopped) return;
    const generation = ++this.generation;
    this.pending = { plan, dueAt: this.clock.now() + plan.delayMs };
    void this.executor
      .run(plan, () => {
        if (generation === this.generation) this.dispatch({ type: 'remediationBegan' }, this.clock.now());
      })
      .then((outcome) => this.finish(generation, outcome));
  }

  private finish(generation: number, outcome: RungOutcome): void {
    if (generation !== this.generation || this.stopped) return;
    switch (outcome.status) {
      case 'done':
        this.dispatch({ type: 'remediationRungDone' }, this.clock.now());
        break;
      case 'failed':
        this.log.warn('remediation rung failed', { rung: this.s.ladder.rungName, error: outcome.error.message });
        this.dispatch({ type: 'remediationRungFailed', error: outcome.error.message }, this.clock.now());
        break;
      case 'cancelled':
        break;
    }
  }

  /** A listener that throws must not leave the machine half way through its effects. */
  private hook(call: () => void): void {
    try {
      call();
    } catch (e) {
      this.log.error('health listener failed', { error: errorMessage(e) });
    }
  }
}
