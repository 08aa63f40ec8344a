import { EventEmitter } from 'node:events';
import type { Logger } from '../../shared/logger.js';
import type { FailureResult, InstanceView, PoolRotateResult, PoolSummary, ResizeResult, SessionRotateResult, SessionView } from '../../shared/api/views.js';
import { MAX_POOL_SIZE, type Config } from '../../shared/config/index.js';
import type { CloseRecord, OpenedRoute, ReleasedRoute, RouteParams, RouteResult } from '../../shared/ipc/protocol.js';
import { ExitpoolError } from '../../shared/errors/catalogue.js';
import { resolveSessionKey } from '../../shared/api/session-key.js';
import type { AuditLog } from '../audit/audit-log.js';
import { RouteLeases, type InvalidationSender } from '../routing/route-leases.js';
import { RecentRefusals } from '../routing/recent-refusals.js';
import type { DestinationBlame } from '../exits/destination-blame.js';
import type { ExitAssignments } from '../exits/exit-assignments.js';
import type { QuarantineCause } from '../health/health-machine.js';
import { viewOf } from '../sessions/session.js';
import { SessionTable, type Assignment, type Placement } from '../sessions/session-table.js';
import { StatsHistory } from '../stats/stats-history.js';
import { CountryPlacement } from './country-placement.js';
import type { FleetSessions } from '../fleet/fleet-sessions.js';
import { FleetRouting } from './fleet-routing.js';
import type { HealthSnapshot } from '../health/health-snapshot.js';
import { PendingSuccesses } from './pending-successes.js';
import { dependsOnClient, ReportBudget, reporterKey, RoutableFloorGuard, type Reporter } from './client-evidence.js';
import type { FailureKind, HealthTracker } from './health-tracker.js';
import { soleComplainingDomain } from './exit-freshness.js';
import { SessionRotation } from './session-rotation.js';
import type { PoolEntry } from './pool-entry.js';
import type { PoolInstance, RotationPlan } from './pool-instance.js';
import { instanceViewOf, poolSummaryOf } from './pool-views.js';

/** Weight of the newest dial latency in an instance's moving average. */
const LATENCY_EWMA_WEIGHT = 0.2;
/** A pool-rotate sweep waits at most this long for one instance's new exit before moving on. */
export const SWEEP_STEP_TIMEOUT_MS = 60_000;
/** Captcha and blocked reports an instance remembers with their sites (for a per-site ban). */
const MAX_COMPLAINTS = 20;
/** Sites a session remembers from its reports. */
const MAX_SESSION_DOMAINS = 5;
/**
 * How long after a restart a restored session waits for its own instance to bootstrap before it
 * is moved to another: a tor that kept its DataDirectory bootstraps in seconds; one that needs
 * a fresh consensus can take a minute.
 */
export const RESTORED_INSTANCE_HOLD_MS = 60_000;


export interface PoolDeps {
  config: Config;
  createInstance(id: number): PoolInstance;
  createHealth(id: number, instance: PoolInstance): HealthTracker;
  audit: AuditLog;
  log: Logger;
  now?: () => number;
  /** When true, the pool serves only after listenersUp(): /health must not say 200 before the proxies listen. */
  waitForListeners?: boolean;
  /** Delivers route invalidations to the proxy workers; absent: no worker holds leases (tests of the pool alone). */
  sendInvalidation?: InvalidationSender;
  /** The exit catalog, assignments and bans (PIN_EXIT_RELAY); absent: tor picks its own exits. */
  exits?: ExitAssignments;
  /** Checks destination refusals through another exit before scoring them; absent: scored as the SPEC says. */
  blame?: DestinationBlame;
  /** A failure was found to be the destination's fault (metrics). */
  onDestinationFault?: () => void;
  /** A connection asking for countries was refused (metrics, by country and reason). */
  onCountryRefusal?: (countries: readonly string[], reason: string) => void;
  /** Which node owns each named session, on a node of a fleet (supervisor/fleet); absent on a node of its own. */
  fleet?: FleetSessions;
}

/** Where a worker dials an instance: its Unix socket when it has one. */
function socksOf(i: PoolInstance): { host: string; port: number; path?: string } {
  return i.socksPath !== null ? { host: i.socksHost, port: i.socksPort, path: i.socksPath } : { host: i.socksHost, port: i.socksPort };
}

const noSuchInstance = (id: number): ExitpoolError => new ExitpoolError('EXITPOOL_NO_SUCH_INSTANCE', `no instance ${id}`);
const noSuchSession = (): ExitpoolError => new ExitpoolError('EXITPOOL_NO_SUCH_SESSION', 'no such session');
const notBootstrapped = (id: number): ExitpoolError => new ExitpoolError('EXITPOOL_NOT_BOOTSTRAPPED', `instance ${id} has not bootstrapped; it cannot be rotated yet`);

/** What the pool tells the service (which passes it on to the workers and the log). */
export interface PoolEvents {
  /** An instance bootstrapped: how many are ready now. */
  'ready-count': [ready: number];
  /** Latched once MIN_READY instances are ready (and the listeners are up). */
  serving: [ready: number];
  /** The set of instance ids changed (grown, shrunk): session ports follow it. */
  'instances-changed': [ids: number[]];
  /** An instance stopped answering: workers re-route the dials they have open to it. */
  'instance-down': [id: number];
}

/**
 * The pool: instances with their health, the session table, routing, accounting and the
 * operations of the API. Lives in the supervisor only; workers reach it over IPC.
 */
export class Pool extends EventEmitter<PoolEvents> {
  readonly sessions: SessionTable;
  readonly stats = new StatsHistory();
  /** Each key's last refused route, briefly (GET /api/sessions/{key}/refusal). */
  readonly refusals = new RecentRefusals(() => this.now());
  private readonly entries = new Map<number, PoolEntry>();
  /** Per worker slot: its open connections per session incarnation, forgotten if the worker dies. */
  private readonly openByWorker = new Map<number, Map<number, { key: string; count: number }>>();
  private readonly leases: RouteLeases;
  private readonly now: () => number;
  private targetSize: number;
  private sweeping = false;
  /** Latched once MIN_READY instances have bootstrapped: before that the proxies refuse at once. */
  private serving = false;
  private listening: boolean;
  private stopped = false;
  private shuttingDown = false;
  /** Instances restored sessions wait for after a restart, until when (holdRestoredSessions). */
  private readonly restoredHolds = new Map<number, number>();
  private readonly totals = { requests: 0, failures: 0, bytesUp: 0, bytesDown: 0 };
  private growTimer: NodeJS.Timeout | null = null;
  private readonly reportBudget: ReportBudget;
  private readonly pendingSuccesses = new PendingSuccesses();
  private readonly floor: RoutableFloorGuard;

  constructor(private readonly deps: PoolDeps) {
    super();
    this.now = deps.now ?? Date.now;
    this.reportBudget = new ReportBudget(deps.config.clientReportBudget, this.now);
    this.floor = new RoutableFloorGuard(deps.config.minRoutable, deps.log);
    this.targetSize = deps.config.poolSize;
    this.listening = !(deps.waitForListeners ?? false);
    this.leases = new RouteLeases(deps.sendInvalidation ?? (() => Promise.resolve()));
    if (deps.exits) deps.exits.onExitGone = (ids) => this.moveToNewExits(ids);
    this.sessions = new SessionTable({
      maxSessions: deps.config.maxSessions,
      ttlMs: deps.config.sessionTtlMs,
      onChanged: (key) => {
        this.leases.sessionChanged(key);
        // Gone from this node (expired, deleted): another node may start it afresh.
        if (deps.fleet && this.sessions.get(key) === undefined) deps.fleet.released(key);
      },
    });
    this.fleetRouting = deps.fleet
      ? new FleetRouting({ fleet: deps.fleet, hasSession: (key) => this.sessions.get(key) !== undefined, routeHere: (p, slot) => this.routeHere(p, slot), audit: deps.audit })
      : null;
  }

  private readonly fleetRouting: FleetRouting | null;

  /** Keys of the sessions used since `since` or with a connection open: on a fleet, their ownership is renewed. */
  sessionKeysUsedSince(since: number): string[] {
    const keys: string[] = [];
    for (const s of this.sessions.all()) if (s.lastSeen >= since || s.active > 0) keys.push(s.key);
    return keys;
  }

  /** Spawns the configured instances (staggered); resolves at once, bootstrap goes on. */
  start(): void {
    this.grow();
  }

  readyCount(): number {
    let n = 0;
    for (const e of this.entries.values()) if (e.instance.ready()) n++;
    return n;
  }

  instanceIds(): number[] {
    return [...this.entries.keys()].sort((a, b) => a - b);
  }

  // ---- routing (hot path: no awaits, no I/O) ----

  /** The proxy listeners are up: the pool may start serving (see PoolDeps.waitForListeners). */
  listenersUp(): void {
    this.listening = true;
    this.maybeServe();
  }

  private maybeServe(): void {
    const ready = this.readyCount();
    if (this.serving || !this.listening || ready < this.deps.config.minReady) return;
    this.serving = true;
    this.emit('serving', ready);
  }

  get isServing(): boolean {
    return this.serving;
  }

  placement(): Placement {
    if (!this.serving) return { routable: [], lastResort: null };
    const routable: number[] = [];
    let single: number | null = null;
    for (const [id, e] of this.entries) {
      if (this.isRoutable(e)) routable.push(id);
    }
    if (routable.length === 0 && this.entries.size === 1) {
      const [id, e] = [...this.entries][0] as [number, PoolEntry];
      // A single-instance pool keeps serving through its own rotation as a last resort.
      if (e.instance.ready() && e.instance.responsive() && e.health.routable() && !e.draining && !e.retiring) single = id;
    }
    return { routable, lastResort: single, fits: this.countries.fits };
  }

  /** Whether evidence the client controls may take `e` out of service (MIN_ROUTABLE). */
  private clientEvidenceMayQuarantine(e: PoolEntry): boolean {
    if (!this.isRoutable(e)) return true;
    return this.floor.allows(this.placement().routable.length, this.targetSize, e.instance.id);
  }

  private isRoutable(e: PoolEntry): boolean {
    return e.instance.ready() && e.instance.responsive() && !e.instance.rotating() && e.health.routable() && !e.draining && !e.retiring;
  }

  /**
   * Routes one connection. A session's route on a routable instance comes with a lease: the
   * worker routes the key's next connections itself (recordOpened counts them) until RouteLeases
   * invalidates it. Session ports, DEFAULT_SESSION=random and a last-resort instance are asked
   * every time.
   */
  route(p: RouteParams & { params?: undefined }, workerSlot: number): RouteResult;
  route(p: RouteParams, workerSlot: number): RouteResult | Promise<RouteResult>;
  route(p: RouteParams, workerSlot: number): RouteResult | Promise<RouteResult> {
    return this.refusals.note(p.key, this.fleetRouting ? this.fleetRouting.route(p, workerSlot) : this.routeHere(p, workerSlot));
  }

  /** Routes on this node's own instances. */
  private routeHere(p: RouteParams, workerSlot: number): RouteResult | Promise<RouteResult> {
    const countries = p.params?.countries;
    if (countries && countries.length > 0 && p.listener !== 'session-port' && this.serving && !this.countries.served(countries)) {
      return this.routeOnceServed(p, workerSlot, countries);
    }
    return this.routeNow(p, workerSlot);
  }

  /** A session asking for countries no instance leaves from: an instance is given an exit there first. */
  private async routeOnceServed(p: RouteParams, workerSlot: number, countries: readonly string[]): Promise<RouteResult> {
    const key = resolveSessionKey(p.key, p.clientIp, this.deps.config.defaultSession) ?? '';
    const refused = await this.countries.ensure(countries, key);
    if (refused) {
      this.deps.onCountryRefusal?.(countries, refused.refusal);
      return { ok: false, reason: refused.refusal, detail: refused.detail };
    }
    if (this.stopped) return { ok: false, reason: 'no_routable_instance' };
    return this.routeNow(p, workerSlot);
  }

  private routeNow(p: RouteParams, workerSlot: number): RouteResult {
    const now = this.now();
    if (p.listener === 'session-port') {
      const e = p.instance === undefined ? undefined : this.entries.get(p.instance);
      if (!e || !this.isRoutable(e)) return { ok: false, reason: 'no_routable_instance' };
      return { ok: true, instance: e.instance.id, ...socksOf(e.instance), key: null, session: null, lease: false, exitIp: e.instance.exit().exitIp };
    }
    const key = resolveSessionKey(p.key, p.clientIp, this.deps.config.defaultSession);
    const placement = this.placement();
    if (key === null) {
      // random: a fresh pick per connection, accounted under the instance only.
      const ids = placement.routable.length > 0 ? placement.routable : placement.lastResort !== null ? [placement.lastResort] : [];
      if (ids.length === 0) return { ok: false, reason: 'no_routable_instance' };
      const e = this.entries.get(ids[Math.floor(Math.random() * ids.length)] as number) as PoolEntry;
      return { ok: true, instance: e.instance.id, ...socksOf(e.instance), key: null, session: null, lease: false, exitIp: e.instance.exit().exitIp };
    }
    if (this.restoredHolds.size > 0 && this.heldForItsInstance(key, now)) return { ok: false, reason: 'no_routable_instance' };
    const before = this.sessions.get(key);
    // The latest username with parameters decides for all of them (a plain key keeps the session's).
    const rotating = (p.params ? p.params.mode : before?.params?.mode) === 'rotating';
    if (before && rotating) {
      const next = this.countries.nextRotating(p.params ? { ...before, params: p.params } : before, placement.routable);
      if (next !== undefined) this.sessions.useInstance(key, next);
    }
    const outcome = this.sessions.route(key, placement, now, p.params);
    if (!outcome.ok) {
      const asked = p.params?.countries ?? before?.params?.countries;
      if (asked && asked.length > 0) {
        this.deps.onCountryRefusal?.(asked, 'no_routable_instance');
        return { ok: false, reason: 'no_routable_instance', detail: `no instance in ${asked.join(', ')} can serve this request` };
      }
      return { ok: false, reason: outcome.reason };
    }
    if (outcome.assignment) this.auditAssignment(outcome.assignment);
    const session = outcome.session;
    const e = this.entries.get(session.instance) as PoolEntry;
    this.countOpen(workerSlot, key, session.id);
    // A rotating session's next connection goes elsewhere: the supervisor is asked every time.
    const lease = placement.routable.includes(session.instance) && session.params?.mode !== 'rotating';
    if (lease) this.leases.granted(session.instance);
    return { ok: true, instance: e.instance.id, ...socksOf(e.instance), key, session: session.id, lease, exitIp: e.instance.exit().exitIp };
  }

  /**
   * After a restart, sessions the durable state put back on instances that are still starting
   * wait for them (RESTORED_INSTANCE_HOLD_MS at most) instead of moving to whichever instance
   * bootstrapped first: a move would cost them the exit IP the restart was meant to keep. Their
   * connections are refused meanwhile, as while the service itself was down.
   */
  holdRestoredSessions(instances: readonly number[]): void {
    const until = this.now() + RESTORED_INSTANCE_HOLD_MS;
    for (const id of instances) if (id < this.targetSize) this.restoredHolds.set(id, until);
  }

  private heldForItsInstance(key: string, now: number): boolean {
    const s = this.sessions.get(key);
    if (!s) return false;
    const until = this.restoredHolds.get(s.instance);
    if (until === undefined) return false;
    if (now < until) return true;
    this.restoredHolds.delete(s.instance);
    return false;
  }

  /** Connections a worker routed with its leases: counted on their sessions as route() counts one. */
  recordOpened(opened: readonly OpenedRoute[], workerSlot: number): void {
    const now = this.now();
    for (const o of opened) {
      if (this.sessions.attach(o.key, o.session, now)) this.countOpen(workerSlot, o.key, o.session);
    }
  }

  /** Every API operation that may move sessions or take instances out awaits this before it answers. */
  leasesSettled(): Promise<void> {
    return this.leases.settled();
  }

  private countOpen(workerSlot: number, key: string, session: number): void {
    let open = this.openByWorker.get(workerSlot);
    if (!open) this.openByWorker.set(workerSlot, (open = new Map()));
    const entry = open.get(session);
    if (entry) entry.count += 1;
    else open.set(session, { key, count: 1 });
  }

  /**
   * Leases on instances no longer in service are dropped (RouteLeases.routableNow). Every way
   * out of service but one goes through moveOff (quarantine by health or by hand, drain,
   * restart, retirement, unready, unresponsive); the one that does not is a rotation that keeps
   * its sessions (rotateInstance). The tick checks again, as a safety net.
   */
  private routabilityMayHaveChanged(): void {
    this.leases.routableNow(this.placement().routable);
  }

  /** A batch of finished connections from one worker. */
  recordCloses(records: readonly CloseRecord[], workerSlot: number): void {
    const now = this.now();
    const open = this.openByWorker.get(workerSlot);
    for (const r of records) {
      this.totals.requests += 1;
      if (!r.ok) this.totals.failures += 1;
      this.totals.bytesUp += r.bytesUp;
      this.totals.bytesDown += r.bytesDown;
      this.stats.record(r);
      if (r.key !== null && r.session !== null) {
        this.sessions.close(r.key, r.session, r, now);
        this.forgetOpen(open, r.session);
      }
      const e = this.entries.get(r.instance);
      if (!e) continue;
      e.requests += 1;
      e.bytesUp += r.bytesUp;
      e.bytesDown += r.bytesDown;
      if (r.latencyMs !== null) e.latencyMs = e.latencyMs === 0 ? r.latencyMs : e.latencyMs + LATENCY_EWMA_WEIGHT * (r.latencyMs - e.latencyMs);
      if (r.ok) {
        // A session's success waits SUCCESS_REPORT_GRACE_MS for a report about it.
        if (r.key !== null) this.pendingSuccesses.hold(r.instance, r.key, Math.min(now, r.endedAt));
        else e.health.success(now, r.endedAt);
      } else {
        e.failures += 1;
        this.scoreTransportFailure(r);
      }
    }
  }

  /**
   * A failed connection's weight on its instance. A refusal tor made about the destination is
   * first checked through another exit (DestinationBlame): if it fails the same way there, it
   * is the destination's fault and counts as a failed request only.
   */
  private scoreTransportFailure(r: CloseRecord): void {
    const failure = r.failure;
    const apply = (scored: boolean): void => {
      const e = this.entries.get(r.instance);
      if (!e) return;
      if (scored) e.lastFailureKind = 'transport';
      const mayQuarantine = !dependsOnClient(failure) || this.clientEvidenceMayQuarantine(e);
      e.health.failure('transport', 'transport', scored, this.now(), { occurredAt: r.endedAt, mayQuarantine });
    };
    const blame = this.deps.blame;
    if (blame && failure?.destination !== undefined && failure.socksReply !== undefined && failure.scored) {
      blame.judge(failure.destination, failure.socksReply, r.instance, (verdict) => {
        if (verdict === 'destination') this.deps.onDestinationFault?.();
        apply(verdict === 'exit');
      });
      return;
    }
    apply(failure?.scored ?? true);
  }

  /**
   * Where to check a destination that failed through instance `except`: another routable
   * instance on another exit IP, or null when there is none.
   */
  probeRoute(except: number): { host: string; port: number; path?: string } | null {
    const leaving = this.exitIpOf(except);
    for (const id of this.placement().routable) {
      if (id === except) continue;
      const e = this.entries.get(id) as PoolEntry;
      if (leaving !== '' && e.instance.exit().exitIp === leaving) continue;
      return socksOf(e.instance);
    }
    return null;
  }

  /** Routes a worker granted but never used (the client left before its CONNECT): not requests. */
  recordReleased(routes: readonly ReleasedRoute[], workerSlot: number): void {
    const open = this.openByWorker.get(workerSlot);
    for (const r of routes) {
      if (r.key === null || r.session === null) continue;
      this.sessions.forgetConnections(r.key, r.session, 1);
      this.forgetOpen(open, r.session);
    }
  }

  /** One connection of session incarnation `session` on a worker ended (closed or released). */
  private forgetOpen(open: Map<number, { key: string; count: number }> | undefined, session: number): void {
    const entry = open?.get(session);
    if (!entry) return;
    if (entry.count <= 1) open?.delete(session);
    else entry.count -= 1;
  }

  /** A proxy worker died: its connections are gone without a close record. */
  workerGone(workerSlot: number): void {
    const open = this.openByWorker.get(workerSlot);
    if (!open) return;
    for (const [session, { key, count }] of open) this.sessions.forgetConnections(key, session, count);
    this.openByWorker.delete(workerSlot);
  }

  // ---- periodic work ----

  tick(): void {
    const now = this.now();
    this.pendingSuccesses.release(now, (id, endedAt) => this.entries.get(id)?.health.success(now, endedAt));
    for (const e of this.entries.values()) e.health.tick(now);
    this.sessions.expire(now);
    const placement = this.placement();
    this.leases.routableNow(placement.routable);
    this.rebalanceDisplaced(placement);
    this.stats.tick(now, { sessions: this.sessions.size, routable: placement.routable.length });
  }

  /**
   * Spreads the sessions an episode piled onto some instances once others are back
   * (SessionTable.rebalance), every tick while any session is displaced: transitions can come
   * and go between two ticks, so the state is checked, not the transition. One audit event per
   * instance that sessions moved to, not one per session.
   */
  private rebalanceDisplaced(placement: Placement): void {
    if (this.sessions.displacedCount === 0) return;
    const moved = this.sessions.rebalance(placement);
    if (moved.length === 0) return;
    const byTarget = new Map<number, number>();
    for (const a of moved) {
      byTarget.set(a.to, (byTarget.get(a.to) ?? 0) + 1);
      if (a.from !== null) this.rotation.noteLeftExit(a.key, this.exitIpOf(a.from));
    }
    for (const [to, count] of byTarget) {
      this.deps.audit.record({
        type: 'assignment',
        instance: to,
        session: null,
        message: `${count} displaced session${count === 1 ? '' : 's'} moved to instance ${to} to rebalance the pool`,
        details: { to, count, reason: 'rebalance' },
      });
    }
  }

  // ---- views ----

  totalsNow(): { requests: number; failures: number; bytesUp: number; bytesDown: number } {
    return { ...this.totals };
  }

  healthLifetime(id: number): ReturnType<HealthTracker['lifetime']> | null {
    return this.entries.get(id)?.health.lifetime() ?? null;
  }

  summary(): PoolSummary {
    return poolSummaryOf(this.deps.config, {
      size: this.entries.size,
      targetSize: this.targetSize,
      ready: this.readyCount(),
      routable: this.placement().routable.length,
      sessions: this.sessions.size,
      totals: this.totals,
    });
  }

  instanceViews(): InstanceView[] {
    return this.instanceIds().map((id) => this.viewOfEntry(this.entries.get(id) as PoolEntry));
  }

  instanceView(id: number): InstanceView {
    const e = this.entries.get(id);
    if (!e) throw noSuchInstance(id);
    return this.viewOfEntry(e);
  }

  private viewOfEntry(e: PoolEntry): InstanceView {
    const id = e.instance.id;
    return instanceViewOf(e, this.sessions.countOn(id), this.deps.exits?.assignment(id) ?? null, this.deps.exits?.shortageOf(id) ?? '');
  }

  sessionViews(): SessionView[] {
    return [...this.sessions.all()].map((s) => viewOf(s, this.entries.get(s.instance)?.instance.exit()));
  }

  sessionView(key: string): SessionView {
    const s = this.sessions.get(key);
    if (!s) throw noSuchSession();
    const view = viewOf(s, this.entries.get(s.instance)?.instance.exit());
    const base = this.deps.config.sessionPortBase;
    if (base !== null) view.session_port = base + s.instance;
    return view;
  }

  // ---- instance actions ----

  async instanceAction(id: number, action: 'rotate' | 'restart' | 'quarantine' | 'release' | 'drain', wipe = true): Promise<InstanceView> {
    const e = this.entries.get(id);
    if (!e) throw noSuchInstance(id);
    if (e.retiring) throw new ExitpoolError('EXITPOOL_INSTANCE_STATE', `instance ${id} is being removed by a resize`);
    const now = this.now();
    switch (action) {
      case 'rotate': {
        if (!e.instance.ready()) throw notBootstrapped(id);
        await this.rotateInstance(e, 'api');
        break;
      }
      case 'restart':
        this.deps.audit.record({ type: 'restart', instance: id, message: `instance ${id} restarting (${wipe ? 'wipe' : 'keep state'})`, details: { wipe } });
        this.moveOff(e, 'drain');
        e.instance.restart(wipe).catch((err: unknown) => this.deps.log.error('restart failed', { instance: id, error: (err as Error).message }));
        break;
      case 'quarantine':
        if (!e.health.quarantine(now)) throw new ExitpoolError('EXITPOOL_INSTANCE_STATE', `instance ${id} is ${e.health.view().state}; only a routable instance can be quarantined`);
        this.moveOff(e, 'quarantine');
        break;
      case 'release':
        e.draining = false;
        e.complaints = [];
        e.health.release(now);
        this.deps.audit.record({ type: 'instance', instance: id, message: `instance ${id} released` });
        break;
      case 'drain':
        e.draining = true;
        this.deps.audit.record({ type: 'instance', instance: id, message: `instance ${id} draining` });
        this.moveOff(e, 'drain');
        break;
    }
    return this.viewOfEntry(e);
  }

  /**
   * A new exit for the instance (a newly assigned one, avoiding `avoid` too, or a new circuit
   * when none qualifies: said in the audit). Throws EXITPOOL_NOT_BOOTSTRAPPED (the instance's
   * NotBootstrappedError) before bootstrap.
   */
  /** Rotations for SessionRotation (it chooses where sessions go; the pool rotates instances). */
  private readonly rotation: SessionRotation = new SessionRotation({
    sessions: () => this.sessions,
    deps: () => this.deps,
    entry: (id) => this.entries.get(id),
    routable: () => this.placement().routable,
    isRoutable: (e) => this.isRoutable(e),
    rotateInstance: (e, avoid, session, domains, countries) => this.rotateInstance(e, 'session', avoid, session, domains, countries),
    fits: (s, id) => this.countries.fits(s, id),
    waitRotationEnd: (i, timeoutMs) => this.waitRotationEnd(i, timeoutMs),
  });

  private readonly countries: CountryPlacement = new CountryPlacement({
    sessions: () => this.sessions,
    exits: () => this.deps.exits,
    entry: (id) => this.entries.get(id),
    routable: () => this.placement().routable,
    rotateInstance: (e, countries, session) => this.rotateInstance(e, 'country', undefined, session, undefined, countries),
    waitRotationEnd: (i, timeoutMs) => this.waitRotationEnd(i, timeoutMs),
  }, () => this.now());

  private async rotateInstance(
    e: PoolEntry,
    by: 'api' | 'session' | 'sweep' | 'exit_gone' | 'country',
    avoid?: readonly string[],
    session?: string,
    avoidDomains?: readonly string[],
    countries?: readonly string[],
  ): Promise<RotationPlan> {
    const id = e.instance.id;
    const leaving = e.instance.exit().exitIp;
    const plan = await e.instance.rotate({
      why: by,
      ...(avoid ? { avoid } : {}),
      ...(session !== undefined ? { session } : {}),
      ...(avoidDomains?.length ? { avoidDomains } : {}),
      ...(countries?.length ? { countries } : {}),
    });
    e.health.rotationStarted(this.now());
    this.routabilityMayHaveChanged();
    const to = plan.exit === '' ? 'a new circuit' : `exit ${plan.exit}`;
    this.deps.audit.record({
      type: 'rotate',
      instance: id,
      session: session ?? null,
      message: `instance ${id} rotating to ${to}${plan.shortage ? ` (${plan.shortage})` : ''}`,
      details: { by, exit: plan.exit, shortage: plan.shortage },
    });
    if (this.deps.config.drainOnRotate) this.moveOff(e, 'rotate', leaving);
    return plan;
  }

  /** Instances whose assigned exit left the consensus or carries no circuit: each moves to a newly assigned one. */
  private moveToNewExits(ids: readonly number[]): void {
    for (const id of ids) {
      const e = this.entries.get(id);
      if (!e || !e.instance.ready() || e.retiring) continue;
      this.rotateInstance(e, 'exit_gone').catch((err: unknown) => this.deps.log.warn('replacing an exit that left the consensus failed', { instance: id, error: (err as Error).message }));
    }
  }

  /** Called by the instance wiring when a rotation ends (new exit known or abandoned). */
  rotationEnded(id: number): void {
    const e = this.entries.get(id);
    if (e) e.health.rotationEnded(this.now());
  }

  /**
   * Health moved an instance to quarantine on its own (scoring): its sessions move at once, and
   * an exit burnt by captchas, blocks or a run of transport failures is banned for EXIT_BAN_TTL.
   */
  quarantined(id: number, cause: QuarantineCause = 'score'): void {
    const e = this.entries.get(id);
    if (!e) return;
    const kind = e.lastFailureKind;
    const fingerprint = e.instance.exit().exitFingerprint || this.deps.exits?.current(id) || '';
    if (this.deps.exits && (kind === 'captcha' || kind === 'blocked' || kind === 'transport') && fingerprint !== '') {
      const domain = kind === 'transport' ? '' : soleComplainingDomain(e.complaints, this.now() - this.deps.config.failureWindowMs);
      this.deps.exits.banAssigned(id, kind, `instance ${id} quarantined (${cause}) after ${kind} failures${domain ? ` on ${domain}` : ''}`, fingerprint, domain);
    }
    e.complaints = [];
    this.moveOff(e, 'quarantine');
  }

  private onlySiteComplaining(e: PoolEntry, domain: string, now: number): boolean {
    return soleComplainingDomain(e.complaints, now - this.deps.config.failureWindowMs) === domain;
  }

  /**
   * Captcha or blocked reports that would have quarantined the instance all named one site: the
   * exit is banned for that site (EXIT_BAN_TTL), the sessions that reported it move to exits not
   * banned for it, and the window's failures are settled, so the exit keeps serving the rest.
   */
  private burntForSite(e: PoolEntry, kind: 'captcha' | 'blocked', domain: string): void {
    const id = e.instance.id;
    const fingerprint = e.instance.exit().exitFingerprint || this.deps.exits?.current(id) || '';
    if (this.deps.exits && fingerprint !== '') this.deps.exits.banAssigned(id, kind, `instance ${id}: ${kind} reports on ${domain} alone`, fingerprint, domain);
    e.complaints = [];
    e.health.settleWindow(this.now());
    this.moveOff(e, 'site_ban', undefined, domain);
  }

  private moveOff(
    e: PoolEntry,
    reason: 'rotate' | 'drain' | 'quarantine' | 'site_ban' | 'retired' | 'unroutable',
    leavingIp = e.instance.exit().exitIp,
    /** A site ban: only the sessions that use this site leave, to exits not banned for it. */
    siteDomain?: string,
  ): Assignment[] {
    // Shutting down, every instance stops: its sessions stay where they are, so that the durable
    // state restarts each on the instance (and the exit) it had.
    if (this.shuttingDown) return [];
    // A quarantine blames the exit (a captcha, a block): another instance on that same exit relay
    // would hand the sessions the same burnt address, so prefer instances on a different one (and,
    // for a site ban, on an exit not banned for that site).
    const blamesExit = reason === 'quarantine' || reason === 'site_ban';
    const placement = blamesExit
      ? this.rotation.targets(e.instance.id, [leavingIp].filter((ip) => ip !== ''), siteDomain === undefined ? [] : [siteDomain]).placement
      : this.placement();
    const moved = this.sessions.moveOff(e.instance.id, placement, reason, siteDomain === undefined ? undefined : (s) => s.domains.includes(siteDomain));
    for (const a of moved) {
      this.rotation.noteLeftExit(a.key, leavingIp);
      this.auditAssignment(a);
    }
    // Sessions that found nowhere to go stay; their leases on this instance must still go.
    this.routabilityMayHaveChanged();
    return moved;
  }

  private auditAssignment(a: Assignment): void {
    const message =
      a.from === null ? `session assigned to instance ${a.to}` : `session moved from instance ${a.from} to ${a.to} (${a.reason})`;
    this.deps.audit.record({ type: 'assignment', instance: a.to, session: a.key, message, details: { from: a.from, to: a.to, reason: a.reason } });
  }

  // ---- session actions ----

  /** Moves the session to an instance on a new exit (SessionRotation). */
  rotateSession(key: string, newnym: boolean): Promise<SessionRotateResult> {
    return this.rotation.rotate(key, newnym);
  }

  /** The exit IP an instance last knew ('' while unknown). */
  private exitIpOf(id: number): string {
    return this.entries.get(id)?.instance.exit().exitIp ?? '';
  }

  /** The exit an instance leaves through now (IP and relay, '' while unknown): the durable state writes it with each session. */
  instanceExit(id: number): { ip: string; fingerprint: string } {
    const exit = this.entries.get(id)?.instance.exit();
    return { ip: exit?.exitIp ?? '', fingerprint: exit?.exitFingerprint ?? '' };
  }

  /** Sessions per country their username asked for (a session naming several counts under each). */
  sessionsByCountry(): Map<string, number> {
    const counts = new Map<string, number>();
    for (const s of this.sessions.all()) for (const c of s.params?.countries ?? []) counts.set(c, (counts.get(c) ?? 0) + 1);
    return counts;
  }

  /** Each instance's health as the durable state keeps it. */
  persistableHealth(): Map<number, HealthSnapshot> {
    return new Map([...this.entries].map(([id, e]) => [id, e.health.persistable()]));
  }

  /**
   * A client's report about a request through `key`. Scored only within the reporter's budget
   * (CLIENT_REPORT_BUDGET), and never quarantines below the routable floor (MIN_ROUTABLE).
   */
  reportFailure(key: string, kind: FailureKind, reason: string, reporter: Reporter, domain = ''): FailureResult {
    const s = this.sessions.get(key);
    if (!s) throw noSuchSession();
    // The report is charged to the instance the session is on now; a quarantine it causes moves
    // the session at once, so read the instance first or the echo and the audit name the new one.
    const instance = s.instance;
    const e = this.entries.get(instance);
    const now = this.now();
    s.failures += 1;
    this.pendingSuccesses.reported(instance, key, now);
    const scored = this.reportBudget.take(reporter);
    this.deps.audit.record({
      type: 'instance',
      instance,
      session: key,
      message: `failure reported on instance ${instance}: ${kind}${reason ? ` (${reason})` : ''}${scored ? '' : ' (not scored: over CLIENT_REPORT_BUDGET)'}`,
      details: { kind, reason, scored, reporter: reporterKey(reporter), ...(domain !== '' ? { domain } : {}) },
    });
    if (domain !== '') s.domains = [...s.domains.filter((d) => d !== domain), domain].slice(-MAX_SESSION_DOMAINS);
    this.sessions.markChanged(key);
    if (e && scored) {
      e.lastFailureKind = kind;
      if (kind === 'captcha' || kind === 'blocked') e.complaints = [...e.complaints, { domain, at: now }].slice(-MAX_COMPLAINTS);
    }
    if (e && scored && domain !== '' && (kind === 'captcha' || kind === 'blocked') && this.onlySiteComplaining(e, domain, now) && e.health.wouldQuarantine(kind, 'client', scored, now)) {
      // Every complaint named this one site: the exit is burnt for it, not for everyone. Its
      // sessions that use the site leave; the instance stays in service for the others.
      e.health.failure(kind, 'client', scored, now, { mayQuarantine: false });
      this.burntForSite(e, kind, domain);
    } else if (e) e.health.failure(kind, 'client', scored, now, { mayQuarantine: this.clientEvidenceMayQuarantine(e) });
    return { session: key, instance, kind, scored };
  }

  /**
   * Sessions another node of the fleet owns, which this node served too while the two could not
   * reach Redis: removed here (audited), so that their next connections go to the owner.
   */
  giveUpSessions(sessions: readonly { key: string; owner: string }[]): void {
    for (const { key, owner } of sessions) {
      if (!this.sessions.delete(key)) continue;
      this.deps.audit.record({
        type: 'assignment',
        instance: null,
        session: key,
        message: `session given up: node ${owner} owns it, and its next connections go there`,
        details: { reason: 'owned_elsewhere', owner_node: owner },
      });
    }
  }

  deleteSession(key: string): null {
    if (!this.sessions.delete(key)) throw noSuchSession();
    return null;
  }

  // ---- pool actions ----

  rotatePool(): PoolRotateResult {
    if (this.sweeping) return { rotating: 0, in_progress: true };
    const ids = this.instanceIds().filter((id) => (this.entries.get(id) as PoolEntry).instance.ready());
    if (ids.length === 0) return { rotating: 0, in_progress: false };
    this.sweeping = true;
    this.deps.audit.record({ type: 'rotate', message: `pool rotate: sweeping ${ids.length} instances`, details: { instances: ids } });
    void this.sweep(ids).finally(() => {
      this.sweeping = false;
    });
    return { rotating: ids.length, in_progress: true };
  }

  private async sweep(ids: number[]): Promise<void> {
    for (const id of ids) {
      const e = this.entries.get(id);
      if (this.stopped) return;
      if (!e || !e.instance.ready() || e.retiring) continue;
      try {
        await this.rotateInstance(e, 'sweep');
        await this.waitRotationEnd(e.instance, SWEEP_STEP_TIMEOUT_MS);
      } catch (err) {
        this.deps.log.warn('pool rotate: instance failed to rotate', { instance: id, error: (err as Error).message });
      }
    }
  }

  private waitRotationEnd(i: PoolInstance, timeoutMs: number): Promise<void> {
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

  resize(size: number): ResizeResult {
    if (!Number.isInteger(size) || size < 1 || size > MAX_POOL_SIZE) throw new ExitpoolError('EXITPOOL_INVALID_REQUEST', `size must be from 1 to ${MAX_POOL_SIZE}`);
    const previous = this.targetSize;
    this.targetSize = size;
    const current = this.instanceIds().filter((id) => !(this.entries.get(id) as PoolEntry).retiring);
    const removing = current.length > size ? current.slice(size) : [];
    const adding: number[] = [];
    for (let id = 0; adding.length < size - current.length; id++) if (!this.entries.has(id)) adding.push(id);
    this.deps.audit.record({ type: 'resize', message: `pool resized from ${previous} to ${size}`, details: { from: previous, to: size, adding, removing } });
    // Mark every leaving instance first: sessions moved off one must not land on another that leaves too.
    const leaving = removing.map((id) => this.entries.get(id) as PoolEntry);
    for (const e of leaving) e.retiring = true;
    for (const e of leaving) void this.retire(e);
    if (adding.length > 0) this.grow();
    return { size, previous, adding, removing };
  }

  /** Adds instances up to the target size, SPAWN_STAGGER apart; re-reads the target each step. */
  private grow(): void {
    if (this.growTimer) return; // a staggered grow is already running
    const step = (): void => {
      this.growTimer = null;
      for (;;) {
        if (this.stopped) return;
        const live = [...this.entries.values()].filter((e) => !e.retiring).length;
        if (live >= this.targetSize) return;
        let id = 0;
        while (this.entries.has(id)) id++;
        this.add(id);
        if (live + 1 >= this.targetSize) return;
        if (this.deps.config.spawnStaggerMs > 0) {
          this.growTimer = setTimeout(step, this.deps.config.spawnStaggerMs);
          return;
        }
      }
    };
    step();
  }

  private add(id: number): void {
    const instance = this.deps.createInstance(id);
    const health = this.deps.createHealth(id, instance);
    const entry: PoolEntry = {
      instance,
      health,
      draining: false,
      retiring: false,
      requests: 0,
      failures: 0,
      bytesUp: 0,
      bytesDown: 0,
      latencyMs: 0,
      complaints: [],
    };
    this.entries.set(id, entry);
    instance.on('ready', () => {
      this.restoredHolds.delete(id);
      health.bootstrapped(this.now());
      this.emit('ready-count', this.readyCount());
      this.maybeServe();
    });
    instance.on('unready', () => {
      health.unbootstrapped(this.now());
      this.moveOff(entry, 'drain');
    });
    instance.on('rotated', () => this.rotationEnded(id));
    instance.on('exit-unreachable', () => this.moveToNewExits([id]));
    instance.on('unresponsive', (silentForMs) => {
      this.deps.audit.record({ type: 'instance', instance: id, message: `instance ${id} does not answer its control port; out of rotation`, details: { silent_for_ms: silentForMs } });
      this.moveOff(entry, 'unroutable');
      // After the move: dials the workers re-route must find the sessions on their new instances.
      this.emit('instance-down', id);
    });
    instance.on('responsive', () => {
      this.deps.audit.record({ type: 'instance', instance: id, message: `instance ${id} answers again; back in rotation` });
    });
    this.deps.audit.record({ type: 'instance', instance: id, message: `instance ${id} starting` });
    instance.start().catch((err: unknown) => this.deps.log.error('instance failed to start', { instance: id, error: (err as Error).message }));
    this.emit('instances-changed', this.instanceIds());
  }

  /** Removes an instance already marked retiring (out of routing): sessions off, then the process. */
  private async retire(e: PoolEntry): Promise<void> {
    const id = e.instance.id;
    this.moveOff(e, 'retired');
    e.health.stop();
    try {
      await e.instance.stop();
    } finally {
      this.entries.delete(id);
      this.deps.exits?.release(id);
      this.pendingSuccesses.forgetInstance(id);
      this.deps.audit.record({ type: 'instance', instance: id, message: `instance ${id} removed` });
      this.emit('instances-changed', this.instanceIds());
    }
  }

  /**
   * Shutdown has begun (the proxies drain next): no remediation runs or starts from here on, so
   * nothing is quarantined or restarted while connections finish and tor is stopped.
   */
  beginShutdown(): void {
    this.shuttingDown = true;
    for (const e of this.entries.values()) e.health.stop();
    this.floor.flush();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.leases.stop();
    this.deps.exits?.stop();
    if (this.growTimer) clearTimeout(this.growTimer);
    for (const e of this.entries.values()) e.health.stop();
    await Promise.all([...this.entries.values()].map((e) => e.instance.stop()));
  }
}
