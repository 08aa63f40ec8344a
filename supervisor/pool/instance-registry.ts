import { EventEmitter } from 'node:events';
import type { Config } from '../../shared/config/index.js';
import type { AuditLog } from '../audit/audit-log.js';
import type { ExitAssignments } from '../exits/exit-assignments.js';
import type { FailureKind, QuarantineCause } from '../health/health-tracker.js';
import { RouteLeases, type InvalidationSender } from '../routing/route-leases.js';
import type { Session } from '../sessions/session.js';
import { SessionTable, type Assignment, type Placement } from '../sessions/session-table.js';
import type { SocksEndpoint, VerdictMove, VerdictSubjects } from '../verdicts/verdict-subjects.js';
import { rankByFreshness, rememberExit, type BannedFor } from './exit-freshness.js';
import type { PoolEntry } from './pool-entry.js';
import type { PoolInstance } from './pool-instance.js';
import { RestoredHolds } from './restored-holds.js';

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
  /** A failure was found to be its destination's fault, not the exit's (metrics). */
  'destination-fault': [];
  /** A connection asking for countries was refused (metrics, by country and reason). */
  'country-refused': [countries: readonly string[], reason: string];
  /** A client reported a failure, scored or not (metrics). */
  'failure-reported': [kind: FailureKind, scored: boolean];
  /** An instance went into quarantine, by health or by hand (metrics). */
  quarantined: [id: number, cause: QuarantineCause];
}

/** Where a worker dials an instance: its Unix socket when it has one. */
export function socksOf(i: PoolInstance): SocksEndpoint {
  return i.socksPath !== null ? { host: i.socksHost, port: i.socksPort, path: i.socksPath } : { host: i.socksHost, port: i.socksPort };
}

/** Why sessions leave an instance (the audit's `reason`). */
export type MoveReason = 'rotate' | 'drain' | 'quarantine' | 'site_ban' | 'report' | 'retired' | 'unroutable' | 'exit_down';

export interface RegistryDeps {
  config: Config;
  audit: AuditLog;
  now: () => number;
  /** The exit catalog, assignments and bans (PIN_EXIT_RELAY); absent: tor picks its own exits. */
  exits?: ExitAssignments;
  /** Delivers route invalidations to the proxy workers; absent: no worker holds leases. */
  sendInvalidation?: InvalidationSender;
  /** When true, the pool serves only after listenersUp(): /health must not say 200 before the proxies listen. */
  waitForListeners: boolean;
  /** A session left this node's table (expired, deleted): on a fleet another node may start it afresh. */
  onSessionGone?: (key: string) => void;
}

/**
 * The pool's shared state, below everything that acts on it: the instances (entries), the
 * session table and its route leases, which instances take traffic (placement), where the
 * sessions of an instance go when they must leave it (moveOff, with the assignment audit), and
 * the serving latch. Routing, the connection ledger, the lifecycle, the verdicts, session
 * rotation and country placement all read and change the pool through it; it calls none of them,
 * which keeps the graph one-way.
 */
export class InstanceRegistry extends EventEmitter<PoolEvents> implements VerdictSubjects {
  readonly sessions: SessionTable;
  readonly leases: RouteLeases;
  readonly holds = new RestoredHolds();
  private readonly entries = new Map<number, PoolEntry>();
  /** The size the pool is resized to (POOL_SIZE at start); retiring instances and spares are not counted in it. */
  targetSize: number;
  /** How many spares the pool keeps beyond targetSize (WARM_SPARES; none without exit assignments). */
  readonly spareTarget: number;
  /** Latched once MIN_READY instances have bootstrapped: before that the proxies refuse at once. */
  private serving = false;
  private listening: boolean;
  /** Shutdown has begun: sessions stay where they are (the durable state restarts each on its exit). */
  shuttingDown = false;

  constructor(private readonly deps: RegistryDeps) {
    super();
    this.targetSize = deps.config.poolSize;
    // A spare is worth keeping only on an exit of its own, which only the exit assignments give.
    this.spareTarget = deps.exits ? deps.config.warmSpares : 0;
    this.listening = !deps.waitForListeners;
    this.leases = new RouteLeases(deps.sendInvalidation ?? (() => Promise.resolve()));
    this.sessions = new SessionTable({
      maxSessions: deps.config.maxSessions,
      ttlMs: deps.config.sessionTtlMs,
      onChanged: (key) => {
        this.leases.sessionChanged(key);
        if (deps.onSessionGone && this.sessions.get(key) === undefined) deps.onSessionGone(key);
      },
    });
  }

  get exits(): ExitAssignments | undefined {
    return this.deps.exits;
  }

  // ---- the instances ----

  entry(id: number): PoolEntry | undefined {
    return this.entries.get(id);
  }

  has(id: number): boolean {
    return this.entries.has(id);
  }

  add(entry: PoolEntry): void {
    this.entries.set(entry.instance.id, entry);
  }

  remove(id: number): void {
    this.entries.delete(id);
  }

  all(): IterableIterator<PoolEntry> {
    return this.entries.values();
  }

  /** The pool's instances, retiring ones included (GET /api/pool `size`); spares are counted apart (spareCounts). */
  get size(): number {
    let n = 0;
    for (const e of this.entries.values()) if (!e.spare) n++;
    return n;
  }

  ids(): number[] {
    return [...this.entries.keys()].sort((a, b) => a - b);
  }

  /** Bootstrapped instances of the pool (spares are counted apart: spareCounts). */
  readyCount(): number {
    let n = 0;
    for (const e of this.entries.values()) if (!e.spare && e.instance.ready()) n++;
    return n;
  }

  isSpare(id: number): boolean {
    return this.entries.get(id)?.spare === true;
  }

  /** A spare a rotation can take at once: routable (ready, on its exit, not mid-rotation) and without sessions. */
  isWarmSpare(e: PoolEntry): boolean {
    return e.spare && this.isRoutable(e) && this.sessions.countOn(e.instance.id) === 0;
  }

  /** The spares (WARM_SPARES) as GET /api/pool counts them. */
  spareCounts(): { size: number; ready: number; warm: number; inUse: number } {
    const counts = { size: 0, ready: 0, warm: 0, inUse: 0 };
    for (const e of this.entries.values()) {
      if (!e.spare || e.retiring) continue;
      counts.size++;
      if (e.instance.ready()) counts.ready++;
      if (this.isWarmSpare(e)) counts.warm++;
      if (this.sessions.countOn(e.instance.id) > 0) counts.inUse++;
    }
    return counts;
  }

  // ---- serving ----

  /** The proxy listeners are up: the pool may start serving (RegistryDeps.waitForListeners). */
  listenersUp(): void {
    this.listening = true;
    this.maybeServe();
  }

  maybeServe(): void {
    const ready = this.readyCount();
    if (this.serving || !this.listening || ready < this.deps.config.minReady) return;
    this.serving = true;
    this.emit('serving', ready);
  }

  get isServing(): boolean {
    return this.serving;
  }

  // ---- routability ----

  isRoutable(e: PoolEntry): boolean {
    return e.instance.ready() && e.instance.responsive() && !e.instance.rotating() && e.health.routable() && !e.draining && !e.retiring;
  }

  /**
   * Where the session table keeps and places sessions. New sessions (and those the pool moves for
   * its own reasons) go to the pool's instances only; a spare is in the list only while it
   * carries sessions that rotated onto it, so that they stay there (the `fits` check keeps every
   * other session off it). When none of the pool's instances is routable, the spares stand in
   * for them, so the proxies keep serving.
   */
  placement(): Placement {
    if (!this.serving) return { routable: [], lastResort: null };
    const members: number[] = [];
    const spares: number[] = [];
    let memberCount = 0;
    let single: PoolEntry | undefined;
    for (const [id, e] of this.entries) {
      if (!e.spare) {
        memberCount++;
        single = e;
      }
      if (this.isRoutable(e)) (e.spare ? spares : members).push(id);
    }
    const standIn = members.length === 0;
    const routable = standIn ? spares : spares.length === 0 ? members : [...members, ...spares.filter((id) => this.sessions.countOn(id) > 0)];
    let lastResort: number | null = null;
    // A single-instance pool keeps serving through its own rotation as a last resort.
    if (routable.length === 0 && memberCount === 1 && single) {
      const e = single;
      if (e.instance.ready() && e.instance.responsive() && e.health.routable() && !e.draining && !e.retiring) lastResort = e.instance.id;
    }
    if (spares.length === 0 && !standIn) return { routable, lastResort, fits: this.fits };
    return { routable, lastResort, fits: (s, id) => this.fits(s, id) && (standIn || s.instance === id || !this.isSpare(id)) };
  }

  /**
   * The routable instances of the pool, for sessions the pool places or moves itself (new ones,
   * a quarantine's, a drain's, a rebalance, an exit for a country): spares only when none of the
   * pool's instances is routable.
   */
  memberPlacement(): Placement {
    if (!this.serving) return { routable: [], lastResort: null };
    const members: number[] = [];
    const spares: number[] = [];
    for (const [id, e] of this.entries) if (this.isRoutable(e)) (e.spare ? spares : members).push(id);
    return { routable: members.length > 0 ? members : spares, lastResort: null, fits: this.fits };
  }

  /**
   * Leases on instances no longer in service are dropped (RouteLeases.routableNow). Every way
   * out of service but one goes through moveOff (quarantine by health or by hand, drain,
   * restart, retirement, unready, unresponsive); the one that does not is a rotation that keeps
   * its sessions (InstanceLifecycle.rotateInstance). The tick checks again, as a safety net.
   */
  routabilityMayHaveChanged(): void {
    this.leases.routableNow(this.placement().routable);
  }

  // ---- what the verdicts judge (VerdictSubjects) ----

  judged(id: number): PoolEntry | undefined {
    return this.entries.get(id);
  }

  /** Routable instances of the pool (spares are counted apart: spareCounts). */
  routableCount(): number {
    if (!this.serving) return 0;
    let n = 0;
    for (const e of this.entries.values()) if (!e.spare && this.isRoutable(e)) n++;
    return n;
  }

  routableId(id: number): boolean {
    const e = this.entries.get(id);
    return e !== undefined && this.isRoutable(e);
  }

  poolSize(): number {
    return this.targetSize;
  }

  /**
   * Where to check a destination that failed through instance `except`: another routable
   * instance on another exit IP, or null when there is none.
   */
  probeRoute(except: number): SocksEndpoint | null {
    const leaving = this.exitIpOf(except);
    for (const id of this.placement().routable) {
      if (id === except) continue;
      const e = this.entries.get(id) as PoolEntry;
      if (leaving !== '' && e.instance.exit().exitIp === leaving) continue;
      return socksOf(e.instance);
    }
    return null;
  }

  moveSessionsOff(id: number, move: VerdictMove): void {
    const e = this.entries.get(id);
    if (e) this.moveOff(e, move.reason, undefined, move.reason === 'site_ban' ? { domain: move.domain, keys: move.keys } : undefined);
  }

  // ---- the exits instances leave through ----

  /** The exit IP an instance last knew ('' while unknown). */
  exitIpOf(id: number): string {
    return this.entries.get(id)?.instance.exit().exitIp ?? '';
  }

  /** The country an instance's traffic leaves from: its assigned exit's, else the one traffic showed. */
  countryOf(id: number): string {
    const e = this.entries.get(id);
    if (!e) return '';
    return (this.deps.exits?.assignment(id)?.country || e.instance.exit().exitCountry || '').toLowerCase();
  }

  /** Whether instance `id` can serve `s` (its exit is in one of the session's countries, when it named any). */
  readonly fits = (s: Pick<Session, 'params'>, id: number): boolean => {
    const countries = s.params?.countries;
    return countries === undefined || countries.length === 0 || countries.includes(this.countryOf(id));
  };

  readonly bannedFor: BannedFor = (exit, domains) => this.deps.exits?.bannedFor(exit, domains) ?? false;

  // ---- where sessions go ----

  /**
   * Other routable instances for a session leaving `from`, freshest exits first (rankByFreshness);
   * for one session (`s`), only those that fit its choices. The placement keeps the pool's fit
   * check, so each session a quarantine moves lands where its countries allow. The pool's own
   * moves stay on the pool's instances; a session's rotation (`withSpares`) may also go to a
   * spare, a warm one only when nothing else is as fresh.
   */
  targets(from: number, avoid: readonly string[], domains: readonly string[] = [], s?: Session, withSpares = false): { placement: Placement; fresh: boolean } {
    const everyRoutable = (): number[] => (this.serving ? [...this.entries.values()].filter((e) => this.isRoutable(e)).map((e) => e.instance.id) : []);
    const candidates = withSpares ? everyRoutable() : this.memberPlacement().routable;
    const others = candidates.filter((id) => id !== from && (s === undefined || this.fits(s, id))).map((id) => ({ id, exit: (this.entries.get(id) as PoolEntry).instance.exit() }));
    const ranked = rankByFreshness(others, { addresses: avoid, domains }, this.bannedFor);
    // A warm spare is kept for a session that finds no other instance as good.
    const taken = ranked.ids.filter((id) => !this.isWarmSpare(this.entries.get(id) as PoolEntry));
    const ids = taken.length > 0 ? taken : ranked.ids;
    return { placement: { routable: ids, lastResort: null, fits: this.fits }, fresh: ranked.fresh };
  }

  /** Remembers the exit a session was moved away from (EXIT_HISTORY of them, newest last). */
  noteLeftExit(key: string, ip: string): void {
    const s = this.sessions.get(key);
    if (!s) return;
    s.recentExits = rememberExit(s.recentExits, ip, this.deps.config.exitHistory);
    this.sessions.markChanged(key);
  }

  /**
   * Moves the sessions of `e` to other instances (all of them, or for a site ban only those that
   * reached or reported the site, to exits not banned for it), audits each move and drops the
   * leases it made stale. A move that blames the exit (quarantine, site ban, report) prefers
   * instances on another exit.
   */
  moveOff(e: PoolEntry, reason: MoveReason, leavingIp = e.instance.exit().exitIp, site?: { domain: string; keys: ReadonlySet<string> }): Assignment[] {
    // Shutting down, every instance stops: its sessions stay where they are, so that the durable
    // state restarts each on the instance (and the exit) it had.
    if (this.shuttingDown) return [];
    const blamesExit = reason === 'quarantine' || reason === 'site_ban' || reason === 'report' || reason === 'exit_down';
    const placement = blamesExit
      ? this.targets(e.instance.id, [leavingIp].filter((ip) => ip !== ''), site === undefined ? [] : [site.domain]).placement
      : this.memberPlacement();
    const moved = this.sessions.moveOff(e.instance.id, placement, reason, site === undefined ? undefined : (s) => site.keys.has(s.key));
    for (const a of moved) {
      this.noteLeftExit(a.key, leavingIp);
      this.auditAssignment(a);
    }
    if (reason === 'exit_down') this.auditStaying(e.instance.id);
    // Sessions that found nowhere to go stay; their leases on this instance must still go.
    this.routabilityMayHaveChanged();
    return moved;
  }

  /**
   * Sessions whose exit died and that found no other instance to go to: they stay, and their
   * instance gets a new exit. Their exit changes as surely as a move's, so each says why.
   */
  private auditStaying(id: number): void {
    for (const key of this.sessions.keysOn(id)) {
      this.deps.audit.record({
        type: 'assignment',
        instance: id,
        session: key,
        message: `session stays on instance ${id}: its exit died and no other instance can take it; the instance gets a new exit (exit_down)`,
        details: { from: id, to: id, reason: 'exit_down' },
      });
    }
  }

  auditAssignment(a: Assignment): void {
    const message =
      a.from === null ? `session assigned to instance ${a.to}` : `session moved from instance ${a.from} to ${a.to} (${a.reason})`;
    this.deps.audit.record({ type: 'assignment', instance: a.to, session: a.key, message, details: { from: a.from, to: a.to, reason: a.reason } });
  }
}
