import { EventEmitter } from 'node:events';
import type { Logger } from '../../shared/logger.js';
import type { FailureResult, InstanceView, PoolRotateResult, PoolSummary, ResizeResult, SessionRotateResult, SessionView } from '../../shared/api/views.js';
import type { Config } from '../../shared/config/index.js';
import type { CloseRecord, DestinationProbe, DestinationProbeResult, OpenedRoute, ReachedHost, ReleasedRoute, RouteParams, RouteResult } from '../../shared/ipc/protocol.js';
import { ExitpoolError } from '../../shared/errors/catalogue.js';
import type { AuditLog } from '../audit/audit-log.js';
import type { InvalidationSender } from '../routing/route-leases.js';
import { RecentRefusals } from '../routing/recent-refusals.js';
import type { ExitAssignments } from '../exits/exit-assignments.js';
import type { FailureKind, HealthTracker } from '../health/health-tracker.js';
import type { HealthSnapshot } from '../health/health-snapshot.js';
import { viewOf } from '../sessions/session.js';
import type { SessionTable } from '../sessions/session-table.js';
import { StatsHistory } from '../stats/stats-history.js';
import type { BudgetCounters } from '../verdicts/budget-counter.js';
import type { Reporter } from '../verdicts/client-evidence.js';
import type { PartyOf } from '../verdicts/parties.js';
import { Verdicts } from '../verdicts/verdicts.js';
import type { FleetSessions } from '../fleet/fleet-sessions.js';
import { FleetRouting } from '../fleet/fleet-routing.js';
import type { FleetNodeSummary, FleetPoolPort } from '../fleet/fleet-pool-port.js';
import { ConnectionLedger, type ConnectionTotals } from './connection-ledger.js';
import { CountryPlacement } from './country-placement.js';
import { InstanceLifecycle, type InstanceAction } from './instance-lifecycle.js';
import { InstanceRegistry, socksOf, type PoolEvents } from './instance-registry.js';
import type { PoolEntry } from './pool-entry.js';
import type { PoolInstance } from './pool-instance.js';
import { instanceViewOf, poolSummaryOf } from './pool-views.js';
import { SessionRotation } from './session-rotation.js';
import { SpareSupply } from './spare-supply.js';
import { isFreshExit } from './exit-freshness.js';

export type { PoolEvents };

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
  /**
   * Dials a destination through an instance (a proxy worker does): refusals about a destination
   * are checked through another exit before they are scored (supervisor/verdicts); absent: they
   * are scored as the SPEC says.
   */
  probeDestination?: (probe: DestinationProbe) => Promise<DestinationProbeResult | null>;
  /** Which node owns each named session, on a node of a fleet (supervisor/fleet); absent on a node of its own. */
  fleet?: FleetSessions;
  /** Who stands behind a credential (supervisor/verdicts/parties.ts); absent: every credential is a party of its own. */
  partyOf?: PartyOf;
  /** The verdicts' per-credential budgets, counted across a fleet (supervisor/fleet); absent: in this node's memory. */
  budgets?: BudgetCounters;
}

const noSuchInstance = (id: number): ExitpoolError => new ExitpoolError('EXITPOOL_NO_SUCH_INSTANCE', `no instance ${id}`);
const noSuchSession = (): ExitpoolError => new ExitpoolError('EXITPOOL_NO_SUCH_SESSION', 'no such session');

/**
 * The pool, as the rest of the supervisor sees it: routing (the hot path, here), and the
 * operations of the API, each handed to the part that owns it (README.md here): the instance
 * registry (shared state), the connection ledger, the verdicts (supervisor/verdicts), the
 * instance lifecycle, session rotation and country placement. Lives in the supervisor only;
 * workers reach it over IPC.
 */
export class Pool extends EventEmitter<PoolEvents> implements FleetPoolPort {
  readonly sessions: SessionTable;
  readonly stats = new StatsHistory();
  /** Each session's last refused route, briefly (GET /api/sessions/{key}/refusal). */
  readonly refusals: RecentRefusals;
  private readonly now: () => number;
  private readonly registry: InstanceRegistry;
  private readonly ledger: ConnectionLedger;
  private readonly verdicts: Verdicts;
  private readonly lifecycle: InstanceLifecycle;
  private readonly rotation: SessionRotation;
  private readonly supply: SpareSupply;
  private readonly countries: CountryPlacement;
  private readonly fleetRouting: FleetRouting | null;

  constructor(private readonly deps: PoolDeps) {
    super();
    const now = (this.now = deps.now ?? Date.now);
    this.refusals = new RecentRefusals(now);
    const { config, audit, log, exits } = deps;
    const registry = (this.registry = new InstanceRegistry({
      config,
      audit,
      now,
      waitForListeners: deps.waitForListeners ?? false,
      ...(exits ? { exits } : {}),
      ...(deps.sendInvalidation ? { sendInvalidation: deps.sendInvalidation } : {}),
      ...(deps.fleet ? { onSessionGone: (key: string) => deps.fleet?.released(key) } : {}),
    }));
    this.sessions = registry.sessions;
    registry.on('ready-count', (ready) => this.emit('ready-count', ready));
    registry.on('serving', (ready) => this.emit('serving', ready));
    registry.on('instances-changed', (ids) => this.emit('instances-changed', ids));
    registry.on('instance-down', (id) => this.emit('instance-down', id));
    registry.on('destination-fault', () => this.emit('destination-fault'));
    registry.on('country-refused', (countries, reason) => this.emit('country-refused', countries, reason));
    registry.on('quarantined', (id, cause) => this.emit('quarantined', id, cause));
    this.verdicts = new Verdicts({
      config,
      subjects: registry,
      sessions: registry.sessions,
      audit,
      log,
      now,
      ...(exits ? { exits } : {}),
      ...(deps.probeDestination ? { probeDestination: deps.probeDestination } : {}),
      ...(deps.partyOf ? { partyOf: deps.partyOf } : {}),
      ...(deps.budgets ? { budgets: deps.budgets } : {}),
      onDestinationFault: () => registry.emit('destination-fault'),
    });
    this.ledger = new ConnectionLedger(registry, this.stats, this.verdicts, now);
    this.lifecycle = new InstanceLifecycle({
      registry,
      verdicts: this.verdicts,
      config,
      audit,
      log,
      now,
      ...(exits ? { exits } : {}),
      createInstance: deps.createInstance,
      createHealth: deps.createHealth,
      viewOf: (e) => this.viewOfEntry(e),
    });
    this.supply = new SpareSupply({ registry, lifecycle: this.lifecycle, config, log });
    this.rotation = new SessionRotation({ registry, lifecycle: this.lifecycle, supply: this.supply, config, audit, log });
    this.countries = new CountryPlacement(registry, this.lifecycle, now);
    this.fleetRouting = deps.fleet
      ? new FleetRouting({ fleet: deps.fleet, hasSession: (key) => this.sessions.get(key) !== undefined, routeHere: (p, slot) => this.routeHere(p, slot), audit, log })
      : null;
  }

  /** Spawns the configured instances (staggered); resolves at once, bootstrap goes on. */
  start(): void {
    this.lifecycle.start();
  }

  readyCount(): number {
    return this.registry.readyCount();
  }

  instanceIds(): number[] {
    return this.registry.ids();
  }

  /** The proxy listeners are up: the pool may start serving (see PoolDeps.waitForListeners). */
  listenersUp(): void {
    this.registry.listenersUp();
  }

  get isServing(): boolean {
    return this.registry.isServing;
  }

  placement(): ReturnType<InstanceRegistry['placement']> {
    return this.registry.placement();
  }

  // ---- routing (hot path: no awaits, no I/O) ----

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
    if (countries && countries.length > 0 && p.listener !== 'session-port' && this.registry.isServing && !this.countries.served(countries)) {
      return this.routeOnceServed(p, workerSlot, countries);
    }
    return this.routeNow(p, workerSlot);
  }

  /** A session asking for countries no instance leaves from: an instance is given an exit there first. */
  private async routeOnceServed(p: RouteParams, workerSlot: number, countries: readonly string[]): Promise<RouteResult> {
    const refused = await this.countries.ensure(countries, p.key ?? '');
    if (refused) {
      this.emit('country-refused', countries, refused.refusal);
      return { ok: false, reason: refused.refusal, detail: refused.detail };
    }
    if (this.lifecycle.isStopped) return { ok: false, reason: 'no_routable_instance' };
    return this.routeNow(p, workerSlot);
  }

  private routeNow(p: RouteParams, workerSlot: number): RouteResult {
    const now = this.now();
    const registry = this.registry;
    if (p.listener === 'session-port') {
      const e = p.instance === undefined ? undefined : registry.entry(p.instance);
      if (!e || !registry.isRoutable(e)) return { ok: false, reason: 'no_routable_instance' };
      return { ok: true, instance: e.instance.id, ...socksOf(e.instance), key: null, session: null, lease: false, exitIp: e.instance.exit().exitIp };
    }
    const key = p.key;
    const placement = registry.placement();
    if (key === null) {
      // random: a fresh pick per connection, accounted under the instance only.
      const ids = placement.routable.length > 0 ? placement.routable : placement.lastResort !== null ? [placement.lastResort] : [];
      if (ids.length === 0) return { ok: false, reason: 'no_routable_instance' };
      const e = registry.entry(ids[Math.floor(Math.random() * ids.length)] as number) as PoolEntry;
      return { ok: true, instance: e.instance.id, ...socksOf(e.instance), key: null, session: null, lease: false, exitIp: e.instance.exit().exitIp };
    }
    const before = this.sessions.get(key);
    if (before && registry.holds.active && registry.holds.holds(before.instance, now)) return { ok: false, reason: 'no_routable_instance' };
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
        this.emit('country-refused', asked, 'no_routable_instance');
        return { ok: false, reason: 'no_routable_instance', detail: `no instance in ${asked.join(', ')} can serve this request` };
      }
      return { ok: false, reason: outcome.reason };
    }
    if (outcome.assignment) registry.auditAssignment(outcome.assignment);
    const session = outcome.session;
    const e = registry.entry(session.instance) as PoolEntry;
    this.ledger.countOpen(workerSlot, key, session.id);
    // A rotating session's next connection goes elsewhere: the supervisor is asked every time.
    const lease = placement.routable.includes(session.instance) && session.params?.mode !== 'rotating';
    if (lease) registry.leases.granted(session.instance);
    return { ok: true, instance: e.instance.id, ...socksOf(e.instance), key, session: session.id, lease, exitIp: e.instance.exit().exitIp };
  }

  /** After a restart, restored sessions on these instances wait for them (RESTORED_INSTANCE_HOLD_MS). */
  holdRestoredSessions(instances: readonly number[]): void {
    // Spares take the indexes after the pool's at start, so theirs come back too.
    this.registry.holds.hold(
      instances.filter((id) => id < this.registry.targetSize + this.registry.spareTarget),
      this.now(),
    );
  }

  // ---- accounting (ConnectionLedger) ----

  recordOpened(opened: readonly OpenedRoute[], workerSlot: number): void {
    this.ledger.recordOpened(opened, workerSlot);
  }

  /** Sessions' connections that started towards a host: which sites each reached through which exit. */
  recordReached(reached: readonly ReachedHost[]): void {
    for (const r of reached) this.verdicts.connectionStarted(r);
  }

  recordCloses(records: readonly CloseRecord[], workerSlot: number): void {
    this.ledger.recordCloses(records, workerSlot);
  }

  recordReleased(routes: readonly ReleasedRoute[], workerSlot: number): void {
    this.ledger.recordReleased(routes, workerSlot);
  }

  workerGone(workerSlot: number): void {
    this.ledger.workerGone(workerSlot);
  }

  /** Every API operation that may move sessions or take instances out awaits this before it answers. */
  leasesSettled(): Promise<void> {
    return this.registry.leases.settled();
  }

  // ---- periodic work ----

  tick(): void {
    const now = this.now();
    this.verdicts.tick(now);
    for (const e of this.registry.all()) e.health.tick(now);
    this.sessions.expire(now);
    const placement = this.registry.placement();
    this.registry.leases.routableNow(placement.routable);
    this.rebalanceDisplaced(this.registry.memberPlacement());
    this.supply.tick();
    this.stats.tick(now, { sessions: this.sessions.size, routable: placement.routable.length });
  }

  /**
   * Spreads the sessions an episode piled onto some instances once others are back
   * (SessionTable.rebalance), every tick while any session is displaced: transitions can come
   * and go between two ticks, so the state is checked, not the transition. One audit event per
   * instance that sessions moved to, not one per session.
   */
  private rebalanceDisplaced(placement: ReturnType<InstanceRegistry['placement']>): void {
    if (this.sessions.displacedCount === 0) return;
    const moved = this.sessions.rebalance(placement);
    if (moved.length === 0) return;
    const byTarget = new Map<number, number>();
    for (const a of moved) {
      byTarget.set(a.to, (byTarget.get(a.to) ?? 0) + 1);
      if (a.from !== null) this.registry.noteLeftExit(a.key, this.registry.exitIpOf(a.from));
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

  totalsNow(): ConnectionTotals {
    return this.ledger.totalsNow();
  }

  healthLifetime(id: number): ReturnType<HealthTracker['lifetime']> | null {
    return this.registry.entry(id)?.health.lifetime() ?? null;
  }

  summary(): PoolSummary {
    return poolSummaryOf(this.deps.config, {
      size: this.registry.size,
      targetSize: this.registry.targetSize,
      ready: this.registry.readyCount(),
      routable: this.registry.routableCount(),
      sessions: this.sessions.size,
      totals: this.ledger.totalsNow(),
      spares: this.registry.spareCounts(),
      spareTarget: this.registry.spareTarget,
    });
  }

  instanceViews(): InstanceView[] {
    return this.registry.ids().map((id) => this.viewOfEntry(this.registry.entry(id) as PoolEntry));
  }

  instanceView(id: number): InstanceView {
    const e = this.registry.entry(id);
    if (!e) throw noSuchInstance(id);
    return this.viewOfEntry(e);
  }

  private viewOfEntry(e: PoolEntry): InstanceView {
    const id = e.instance.id;
    return instanceViewOf(e, this.sessions.countOn(id), this.deps.exits?.assignment(id) ?? null, this.deps.exits?.shortageOf(id) ?? '', (fp) => this.deps.exits?.addressOf(fp));
  }

  sessionViews(): SessionView[] {
    return [...this.sessions.all()].map((s) => viewOf(s, this.registry.entry(s.instance)?.instance.exit()));
  }

  sessionView(key: string): SessionView {
    const s = this.sessions.get(key);
    if (!s) throw noSuchSession();
    const view = viewOf(s, this.registry.entry(s.instance)?.instance.exit());
    const base = this.deps.config.sessionPortBase;
    if (base !== null) view.session_port = base + s.instance;
    return view;
  }

  /** The exit an instance leaves through now (IP and relay, '' while unknown): the durable state writes it with each session. */
  instanceExit(id: number): { ip: string; fingerprint: string } {
    const exit = this.registry.entry(id)?.instance.exit();
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
    return new Map([...this.registry.all()].map((e) => [e.instance.id, e.health.persistable()]));
  }

  // ---- the API's operations ----

  /** Moves the session to an instance on a new exit (SessionRotation). */
  rotateSession(key: string, newnym: boolean): Promise<SessionRotateResult> {
    return this.rotation.rotate(key, newnym);
  }

  /**
   * A client's report about a request through `key`: the verdicts weigh it (supervisor/verdicts),
   * and the session leaves the reported exit at once, with the sessions its credential sent
   * through that exit, whatever the report's budget (it harms no one else).
   */
  async reportFailure(key: string, kind: FailureKind, reason: string, reporter: Reporter, domain = ''): Promise<FailureResult> {
    const v = this.verdicts.reportFailure(key, kind, reason, reporter, domain);
    this.emit('failure-reported', kind, v.scored);
    let moved = false;
    let newExit = false;
    let note = '';
    const s = this.sessions.get(key);
    if (s && s.instance === v.instance) {
      const outcome = await this.rotation.moveReported(key).catch(() => null);
      moved = outcome?.moved ?? false;
      newExit = outcome?.result.new_exit ?? false;
      note = outcome?.result.exit_note ?? 'the session went away meanwhile';
    } else if (s) {
      // The quarantine or site ban the report caused moved it already.
      moved = true;
      const exit = this.registry.entry(s.instance)?.instance.exit();
      newExit = exit !== undefined && isFreshExit(exit, { addresses: s.recentExits, domains: s.domains }, this.registry.bannedFor);
      if (!newExit) note = `no instance on an exit outside the session's last ${this.deps.config.exitHistory} exits: moved to one that may repeat an exit`;
    }
    for (const other of v.move.slice(1)) if (this.sessions.get(other)?.instance === v.instance) this.rotation.moveAlong(other);
    const now = this.sessions.get(key);
    return { session: v.session, instance: v.instance, kind: v.kind, scored: v.scored, moved, exit_ip: now ? this.registry.exitIpOf(now.instance) : '', new_exit: newExit, exit_note: note };
  }

  deleteSession(key: string): null {
    if (!this.sessions.delete(key)) throw noSuchSession();
    return null;
  }

  instanceAction(id: number, action: InstanceAction, wipe = true): Promise<InstanceView> {
    return this.lifecycle.instanceAction(id, action, wipe);
  }

  rotatePool(): PoolRotateResult {
    return this.lifecycle.rotatePool();
  }

  resize(size: number): ResizeResult {
    return this.lifecycle.resize(size);
  }

  // ---- a node of a fleet (FleetPoolPort) ----

  /** Keys of the sessions used since `since` or with a connection open: on a fleet, their ownership is renewed. */
  sessionKeysUsedSince(since: number): string[] {
    const keys: string[] = [];
    for (const s of this.sessions.all()) if (s.lastSeen >= since || s.active > 0) keys.push(s.key);
    return keys;
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

  /** What this node publishes of itself to the fleet (GET /api/fleet on any node). */
  nodeSummary(): FleetNodeSummary {
    return {
      routable: this.registry.routableCount(),
      sessions: this.sessions.size,
      instances: this.instanceViews().map((i) => ({
        id: i.id,
        ready: i.ready,
        state: i.health.state,
        exit_ip: i.exit_ip,
        exit_country: i.exit_country,
        exit_fingerprint: i.assigned_exit?.fingerprint ?? '',
        exit_shortage: i.exit_shortage,
        sessions: i.sessions,
        requests: i.totals.requests,
      })),
    };
  }

  // ---- shutdown ----

  /** Shutdown has begun (the proxies drain next): no remediation runs or starts from here on. */
  beginShutdown(): void {
    this.lifecycle.beginShutdown();
  }

  async stop(): Promise<void> {
    this.registry.leases.stop();
    this.deps.exits?.stop();
    await this.lifecycle.stop();
  }
}
