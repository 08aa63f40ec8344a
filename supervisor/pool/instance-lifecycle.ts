import type { InstanceView, PoolRotateResult, ResizeResult } from '../../shared/api/views.js';
import { MAX_POOL_SIZE, type Config } from '../../shared/config/index.js';
import { ExitpoolError } from '../../shared/errors/catalogue.js';
import { errorMessage } from '../../shared/errors/error-message.js';
import type { Logger } from '../../shared/logger.js';
import type { AuditLog } from '../audit/audit-log.js';
import type { ExitAssignments } from '../exits/exit-assignments.js';
import type { HealthTracker } from '../health/health-tracker.js';
import type { ExitDownVerdict } from '../tor/exit-liveness.js';
import type { Verdicts } from '../verdicts/verdicts.js';
import type { InstanceRegistry } from './instance-registry.js';
import type { PoolEntry } from './pool-entry.js';
import type { PoolInstance, RotationPlan } from './pool-instance.js';

/** A pool-rotate sweep waits at most this long for one instance's new exit before moving on. */
export const SWEEP_STEP_TIMEOUT_MS = 60_000;

export type InstanceAction = 'rotate' | 'restart' | 'quarantine' | 'release' | 'drain';

/** Who asked for an instance's rotation (the audit's `by`). */
export type RotationCause = 'api' | 'session' | 'sweep' | 'exit_gone' | 'exit_down' | 'country' | 'spare';

/** What a rotation must respect besides the pool's distinctness (passed on to the exit choice). */
export interface InstanceRotation {
  /** Exit IPs (and their /24s) the new exit must not have: a session's recent exits. */
  avoid?: readonly string[];
  /** The session whose rotation asked (its audit events are then session events). */
  session?: string;
  /** Sites whose per-site bans the new exit must respect. */
  avoidDomains?: readonly string[];
  /** Only an exit in one of these countries. */
  countries?: readonly string[];
}

export interface LifecycleDeps {
  registry: InstanceRegistry;
  verdicts: Verdicts;
  config: Config;
  audit: AuditLog;
  log: Logger;
  now: () => number;
  exits?: ExitAssignments;
  createInstance(id: number): PoolInstance;
  createHealth(id: number, instance: PoolInstance): HealthTracker;
  /** The view an action answers with. */
  viewOf(e: PoolEntry): InstanceView;
}

const noSuchInstance = (id: number): ExitpoolError => new ExitpoolError('EXITPOOL_NO_SUCH_INSTANCE', `no instance ${id}`);
const notBootstrapped = (id: number): ExitpoolError => new ExitpoolError('EXITPOOL_NOT_BOOTSTRAPPED', `instance ${id} has not bootstrapped; it cannot be rotated yet`);

/**
 * Instances coming and going and what is done to them: spawning (staggered), resizing,
 * retiring, the operator's instance actions, rotations (every one goes through rotateInstance),
 * pool sweeps, replacing exits that left the consensus, and shutdown. Each instance's events
 * (bootstrapped, died, frozen) and its health's (quarantine, audit) are wired here, where it is
 * added.
 */
export class InstanceLifecycle {
  private sweeping = false;
  private growTimer: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(private readonly deps: LifecycleDeps) {
    deps.exits?.on('exit-gone', (ids) => this.moveToNewExits(ids));
    deps.exits?.setIdle((id) => deps.registry.sessions.countOn(id) === 0);
  }

  get isStopped(): boolean {
    return this.stopped;
  }

  /** Spawns the configured instances (staggered); returns at once, bootstrap goes on. */
  start(): void {
    this.grow();
  }

  // ---- size ----

  resize(size: number): ResizeResult {
    const { registry, audit } = this.deps;
    // Spares take instance indexes too: the pool and its spares stay within MAX_POOL_SIZE.
    const largest = MAX_POOL_SIZE - registry.spareTarget;
    if (!Number.isInteger(size) || size < 1 || size > largest) {
      throw new ExitpoolError('EXITPOOL_INVALID_REQUEST', `size must be from 1 to ${largest}${registry.spareTarget > 0 ? ` (MAX_POOL_SIZE ${MAX_POOL_SIZE} less WARM_SPARES ${registry.spareTarget})` : ''}`);
    }
    const previous = registry.targetSize;
    registry.targetSize = size;
    // A resize counts the pool's instances only: the spares stay as they are.
    const current = registry.ids().filter((id) => !(registry.entry(id) as PoolEntry).retiring && !registry.isSpare(id));
    const removing = current.length > size ? current.slice(size) : [];
    const adding: number[] = [];
    for (let id = 0; adding.length < size - current.length; id++) if (!registry.has(id)) adding.push(id);
    audit.record({ type: 'resize', message: `pool resized from ${previous} to ${size}`, details: { from: previous, to: size, adding, removing } });
    // Mark every leaving instance first: sessions moved off one must not land on another that leaves too.
    const leaving = removing.map((id) => registry.entry(id) as PoolEntry);
    for (const e of leaving) e.retiring = true;
    for (const e of leaving) void this.retire(e);
    if (adding.length > 0) this.grow();
    return { size, previous, adding, removing };
  }

  /**
   * Adds instances up to the target size, then spares up to WARM_SPARES, SPAWN_STAGGER apart;
   * re-reads the targets each step. Each takes the lowest free index.
   */
  private grow(): void {
    if (this.growTimer) return; // a staggered grow is already running
    const { registry, config } = this.deps;
    const step = (): void => {
      this.growTimer = null;
      for (;;) {
        if (this.stopped) return;
        const live = [...registry.all()].filter((e) => !e.retiring);
        const members = live.filter((e) => !e.spare).length;
        const spares = live.length - members;
        const spare = members >= registry.targetSize;
        if (spare && spares >= registry.spareTarget) return;
        let id = 0;
        while (registry.has(id)) id++;
        this.add(id, spare);
        if (live.length + 1 >= registry.targetSize + registry.spareTarget) return;
        if (config.spawnStaggerMs > 0) {
          this.growTimer = setTimeout(step, config.spawnStaggerMs);
          return;
        }
      }
    };
    step();
  }

  private add(id: number, spare: boolean): void {
    const { registry, verdicts, audit, log } = this.deps;
    const instance = this.deps.createInstance(id);
    const health = this.deps.createHealth(id, instance);
    const entry: PoolEntry = { instance, health, draining: false, retiring: false, spare, requests: 0, failures: 0, bytesUp: 0, bytesDown: 0, latencyMs: 0 };
    registry.add(entry);
    // A manual quarantine moves its sessions itself (instanceAction) and bans nothing.
    health.on('quarantine', (cause) => {
      registry.emit('quarantined', id, cause);
      if (cause !== 'manual') verdicts.quarantined(id, cause);
    });
    health.on('audit', (e) => audit.record({ type: e.type, instance: id, message: e.message, details: e.details }));
    instance.on('ready', () => {
      registry.holds.release(id);
      health.bootstrapped(this.deps.now());
      registry.emit('ready-count', registry.readyCount());
      registry.maybeServe();
    });
    instance.on('unready', () => {
      health.unbootstrapped(this.deps.now());
      registry.moveOff(entry, 'drain');
    });
    instance.on('rotated', () => health.rotationEnded(this.deps.now()));
    instance.on('exit-unreachable', () => this.moveToNewExits([id]));
    instance.on('exit-down', (verdict) => this.exitDied(id, verdict));
    instance.on('unresponsive', (silentForMs) => {
      audit.record({ type: 'instance', instance: id, message: `instance ${id} does not answer its control port; out of rotation`, details: { silent_for_ms: silentForMs } });
      registry.moveOff(entry, 'unroutable');
      // After the move: dials the workers re-route must find the sessions on their new instances.
      registry.emit('instance-down', id);
    });
    instance.on('responsive', () => {
      audit.record({ type: 'instance', instance: id, message: `instance ${id} answers again; back in rotation` });
    });
    audit.record({ type: 'instance', instance: id, message: spare ? `instance ${id} starting as a spare (WARM_SPARES)` : `instance ${id} starting`, ...(spare ? { details: { spare: true } } : {}) });
    instance.start().catch((err: unknown) => log.error('instance failed to start', { instance: id, error: errorMessage(err) }));
    registry.emit('instances-changed', registry.ids());
  }

  /** Removes an instance already marked retiring (out of routing): sessions off, then the process. */
  private async retire(e: PoolEntry): Promise<void> {
    const { registry, verdicts, audit, exits } = this.deps;
    const id = e.instance.id;
    registry.moveOff(e, 'retired');
    e.health.stop();
    try {
      await e.instance.stop();
    } finally {
      registry.remove(id);
      exits?.release(id);
      verdicts.forgetInstance(id);
      audit.record({ type: 'instance', instance: id, message: `instance ${id} removed` });
      registry.emit('instances-changed', registry.ids());
    }
  }

  // ---- the operator's actions ----

  async instanceAction(id: number, action: InstanceAction, wipe = true): Promise<InstanceView> {
    const { registry, verdicts, audit, log } = this.deps;
    const e = registry.entry(id);
    if (!e) throw noSuchInstance(id);
    if (e.retiring) throw new ExitpoolError('EXITPOOL_INSTANCE_STATE', `instance ${id} is being removed by a resize`);
    const now = this.deps.now();
    switch (action) {
      case 'rotate': {
        if (!e.instance.ready()) throw notBootstrapped(id);
        await this.rotateInstance(e, 'api');
        break;
      }
      case 'restart':
        audit.record({ type: 'restart', instance: id, message: `instance ${id} restarting (${wipe ? 'wipe' : 'keep state'})`, details: { wipe } });
        registry.moveOff(e, 'drain');
        e.instance.restart(wipe).catch((err: unknown) => log.error('restart failed', { instance: id, error: errorMessage(err) }));
        break;
      case 'quarantine':
        if (!e.health.quarantine(now)) throw new ExitpoolError('EXITPOOL_INSTANCE_STATE', `instance ${id} is ${e.health.view().state}; only a routable instance can be quarantined`);
        registry.moveOff(e, 'quarantine');
        break;
      case 'release':
        e.draining = false;
        verdicts.released(id);
        e.health.release(now);
        audit.record({ type: 'instance', instance: id, message: `instance ${id} released` });
        break;
      case 'drain':
        e.draining = true;
        audit.record({ type: 'instance', instance: id, message: `instance ${id} draining` });
        registry.moveOff(e, 'drain');
        break;
    }
    return this.deps.viewOf(e);
  }

  // ---- rotations ----

  /**
   * A new exit for the instance (a newly assigned one, avoiding what `rotation` names, or a new
   * circuit when none qualifies: said in the audit). Throws EXITPOOL_NOT_BOOTSTRAPPED (the
   * instance's NotBootstrappedError) before bootstrap.
   */
  async rotateInstance(e: PoolEntry, by: RotationCause, rotation: InstanceRotation = {}): Promise<RotationPlan> {
    const { registry, audit, config } = this.deps;
    const id = e.instance.id;
    const leaving = e.instance.exit().exitIp;
    const plan = await e.instance.rotate({
      why: by,
      ...(rotation.avoid ? { avoid: rotation.avoid } : {}),
      ...(rotation.session !== undefined ? { session: rotation.session } : {}),
      ...(rotation.avoidDomains?.length ? { avoidDomains: rotation.avoidDomains } : {}),
      ...(rotation.countries?.length ? { countries: rotation.countries } : {}),
    });
    e.health.rotationStarted(this.deps.now());
    registry.routabilityMayHaveChanged();
    const to = plan.exit === '' ? 'a new circuit' : `exit ${plan.exit}`;
    audit.record({
      type: 'rotate',
      instance: id,
      session: rotation.session ?? null,
      message: `instance ${id} rotating to ${to}${plan.shortage ? ` (${plan.shortage})` : ''}`,
      details: { by, exit: plan.exit, shortage: plan.shortage },
    });
    if (config.drainOnRotate) registry.moveOff(e, 'rotate', leaving);
    return plan;
  }

  /** Resolves once the instance's rotation ended (or at once when none runs), or after `timeoutMs`. */
  waitRotationEnd(i: PoolInstance, timeoutMs: number): Promise<void> {
    if (!i.rotating()) return Promise.resolve();
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        i.off('rotated', done);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      i.on('rotated', done);
    });
  }

  rotatePool(): PoolRotateResult {
    const { registry, audit } = this.deps;
    if (this.sweeping) return { rotating: 0, in_progress: true };
    const ids = registry.ids().filter((id) => (registry.entry(id) as PoolEntry).instance.ready());
    if (ids.length === 0) return { rotating: 0, in_progress: false };
    this.sweeping = true;
    audit.record({ type: 'rotate', message: `pool rotate: sweeping ${ids.length} instances`, details: { instances: ids } });
    void this.sweep(ids).finally(() => {
      this.sweeping = false;
    });
    return { rotating: ids.length, in_progress: true };
  }

  private async sweep(ids: number[]): Promise<void> {
    for (const id of ids) {
      const e = this.deps.registry.entry(id);
      if (this.stopped) return;
      if (!e || !e.instance.ready() || e.retiring) continue;
      try {
        await this.rotateInstance(e, 'sweep');
        await this.waitRotationEnd(e.instance, SWEEP_STEP_TIMEOUT_MS);
      } catch (err) {
        this.deps.log.warn('pool rotate: instance failed to rotate', { instance: id, error: errorMessage(err) });
      }
    }
  }

  /** Instances whose assigned exit left the consensus or carries no circuit: each moves to a newly assigned one. */
  private moveToNewExits(ids: readonly number[], by: RotationCause = 'exit_gone'): void {
    if (this.stopped) return; // every tor is stopping: no new pin
    for (const id of ids) {
      const e = this.deps.registry.entry(id);
      // A quarantined instance gets its new exit from the remediation ladder.
      if (!e || !e.instance.ready() || e.retiring || !e.health.routable()) continue;
      this.rotateInstance(e, by).catch((err: unknown) => this.deps.log.warn('replacing an exit failed', { instance: id, by, error: errorMessage(err) }));
    }
  }

  /**
   * Instance `id`'s tor found its pinned exit dead (supervisor/exits/README.md, "Exits that die").
   * The verdicts mark it down and move the sessions of every instance on it to live exits
   * (quarantining one on probation); the dials the workers still have open through those
   * instances are re-routed at once (they would wait for a circuit that cannot be built); and each
   * routable one is pinned to a new exit, by the path an exit that left the consensus takes.
   */
  private exitDied(id: number, verdict: ExitDownVerdict): void {
    const { registry, verdicts } = this.deps;
    const evidence = verdict.evidence.map((e) => `${e.kind} via $${e.middle} (${e.reason})`);
    const ids = verdicts.exitDown(id, verdict.fingerprint, evidence);
    for (const i of ids) registry.emit('instance-down', i);
    this.moveToNewExits(ids, 'exit_down');
  }

  // ---- shutdown ----

  /**
   * Shutdown has begun (the proxies drain next): no remediation runs or starts from here on, so
   * nothing is quarantined or restarted while connections finish and tor is stopped.
   */
  beginShutdown(): void {
    this.deps.registry.shuttingDown = true;
    for (const e of this.deps.registry.all()) e.health.stop();
    this.deps.verdicts.flush();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.growTimer) clearTimeout(this.growTimer);
    for (const e of this.deps.registry.all()) e.health.stop();
    await Promise.all([...this.deps.registry.all()].map((e) => e.instance.stop()));
  }
}
