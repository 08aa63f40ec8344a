import { EventEmitter } from 'node:events';
import type { ExitAssignmentView, ExitDownView } from '../../shared/api/views.js';
import type { Logger } from '../../shared/logger.js';
import { errorMessage } from '../../shared/errors/error-message.js';
import type { AuditLog } from '../audit/audit-log.js';
import type { GetInfo } from '../tor/relay-directory.js';
import { ExitBans, type BanCause, type ExitBan } from './exit-bans.js';
import { ExitCatalog } from './exit-catalog.js';
import { ExitDowns, exitDownViewOf, type ExitDown, type ExitDownTimes } from './exit-downs.js';
import { chooseExit, type ExitChoiceInput } from './exit-choice.js';
import { ExitEgress, type EgressProbeFailure, type EgressProbeStats, type ExitEgressOptions } from './exit-egress.js';
import type { ProbeRoute } from './egress-prober.js';
import { addressBlock, distinctKeys, type AddressSource, type DistinctUnit, type ExitRelay } from './exit-relay.js';
import { matchesNodeList } from './node-selection.js';
import { instancesToSpread } from './exit-spread.js';
import { AssignmentTable, type Assignment, type RestoredAssignment } from './assignment-table.js';
import { instancesWord, type ExitAnnouncer } from './exit-announcer.js';
import { FleetYields } from './fleet-yields.js';
import { EgressReactions } from './egress-reactions.js';
import { ExitSanctions } from './exit-sanctions.js';

/** How often the catalog is read again from a running instance (consensuses change hourly). */
export const EXIT_CATALOG_REFRESH_MS = 60_000;

export interface ExitAssignmentsOptions {
  unit: DistinctUnit;
  banTtlMs: number;
  /** TOR_EXIT_NODES, normalised; empty = every exit. */
  exitNodes: readonly string[];
  strictNodes: boolean;
  audit: AuditLog;
  log: Logger;
  now?: () => number;
  random?: () => number;
  /** How long a dead exit is held and watched (exit-downs.ts); default EXIT_DOWN_TIMES. */
  downTimes?: ExitDownTimes;
  /** Measuring the addresses exits leave from (EGRESS_PROBE_URLS, EXIT_LIST); absent: no probe, no list. */
  egress?: ExitEgressOptions;
}

export type { RestoredAssignment } from './assignment-table.js';

/** Exits (or their addresses and blocks) a choice must not land on: a session's recent exits. */
export interface ExitAvoidance {
  addresses: readonly string[];
  /** Sites the session reported: exits banned for any of them are avoided too. */
  domains?: readonly string[];
}

export interface NextExitOptions {
  /** Never the instance's current exit. */
  fresh: boolean;
  avoid?: ExitAvoidance;
  /** Why (audit): bootstrap, retry, api, session, sweep, ladder, exit_gone, refresh, country. */
  why: string;
  /** Only an exit in one of these countries (lower-case ISO codes): a session's username asked for them. */
  countries?: readonly string[];
  /** The session whose rotation asked: the audit event is then a session event (a proxy token can cause it). */
  session?: string;
}

/** The outcome of asking for an instance's next exit. */
export type NextExit =
  | { ok: true; relay: ExitRelay; distinct: boolean; note: string }
  | { ok: false; note: string };

/** What the instance wiring (TorPoolInstance) needs: which exit to pin next. */
export interface ExitSteering {
  /** Reads the catalog through instance `id`'s control port unless it has been read already; later refreshes may use it too. */
  ensureCatalog(id: number, getInfo: GetInfo): Promise<void>;
  /** Chooses and records the exit instance `id` leaves through next; never its current one when `fresh`. */
  next(id: number, options: NextExitOptions): NextExit;
  /** The fingerprint instance `id` is assigned now, if any. */
  current(id: number): string | undefined;
  /** The assignment did not work (no circuit through the exit): banned briefly, chosen again elsewhere. */
  unreachable(id: number, fingerprint: string): void;
  /**
   * The pin to `fingerprint` is in force on instance `id` (`socks` is its SocksPort): its egress
   * address is measured unless known within EGRESS_PROBE_TTL. Resolves once known (or the probe
   * failed, within EGRESS_PROBE_TIMEOUT) with whether the instance keeps the exit: false when
   * the measured address shares a distinctness unit with another instance's exit while another
   * exit would not (`settling`: the caller chooses again; otherwise the instance is moved).
   */
  egressPinned(id: number, fingerprint: string, socks: ProbeRoute, settling: boolean): Promise<{ keep: boolean }>;
  /** The address and country sites see for an exit, when a probe or the exit list says it is not the published one's. */
  egressOf(fingerprint: string): { address: string; country: string } | undefined;
}

/** What the exit assignments tell the pool (exit-gone) and the fleet (the rest). */
export interface ExitAssignmentsEvents {
  /** These instances' assigned exit left the consensus, another node holds it, or it is another instance's too while a relay is free: each needs another. */
  'exit-gone': [ids: number[]];
  /** An assignment changed: the fleet claims or releases its lease at once. */
  'assignments-changed': [];
  /** A ban made here (not one applied from the fleet): the fleet shares it. */
  banned: [ban: ExitBan];
  /** A ban lifted by hand here: the fleet lifts it everywhere. */
  lifted: [fingerprint: string];
  /** A probe through an exit failed in a way that is about the exit: evidence for supervisor/verdicts. */
  'egress-failed': [failure: EgressProbeFailure];
}

/**
 * The pool's exits: the catalog, which instance is assigned which exit (distinct by
 * EXIT_DISTINCT while the catalog allows), bans, and the choice of a new exit for a rotation.
 * Every read is from memory; the catalog is refreshed in the background.
 */
export class ExitAssignments extends EventEmitter<ExitAssignmentsEvents> implements ExitSteering {
  readonly catalog = new ExitCatalog();
  readonly bans = new ExitBans();
  /** Exits found dead by the pool's own evidence: a short hold, then probation (exit-downs.ts). */
  readonly downs: ExitDowns;
  /** Who holds which exit, here and (leased) on other nodes of a fleet. */
  private readonly table: AssignmentTable;
  /** Bans and suspects: what the pool holds against exits (exit-sanctions.ts). */
  private readonly sanctions: ExitSanctions;
  private refreshing: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly now: () => number;
  private readonly random: () => number;
  /** Control ports the catalog can be read through, by instance (dropped when the instance leaves). */
  private readonly sources = new Map<number, GetInfo>();
  /** The relay each instance was last said to move off for sharing it (`spreadOffSharedExits`): said once. */
  private readonly spreadSaid = new Map<number, string>();
  /** Whether an instance serves no session (the pool says): only such an instance moves off a shared relay. */
  private idle: (id: number) => boolean = () => true;
  /** The addresses exits leave from: probes and the exit list (README.md, "What sites see"). */
  readonly egress: ExitEgress;
  /** What the pool does with those addresses. */
  private readonly egressReactions: EgressReactions;
  /** What this node does when another node of the fleet holds an exit or unit its instances have. */
  private readonly fleet: FleetYields;

  constructor(private readonly options: ExitAssignmentsOptions) {
    super();
    this.now = options.now ?? Date.now;
    this.random = options.random ?? Math.random;
    this.downs = new ExitDowns(options.downTimes);
    this.egress = new ExitEgress(options.egress ?? { urls: [], ttlMs: 0, timeoutMs: 0, exitList: '', fetch: () => Promise.resolve(null) }, this.catalog, options.log, this.now);
    this.table = new AssignmentTable(this.catalog, options.unit);
    const say: ExitAnnouncer = {
      audit: (instance, message, details, session) => this.audit(instance, message, details, session),
      exitGone: (ids) => this.emit('exit-gone', ids),
      assignmentsChanged: () => this.emit('assignments-changed'),
      egressFailed: (failure) => this.emit('egress-failed', failure),
      banned: (ban) => this.emit('banned', ban),
      lifted: (fingerprint) => this.emit('lifted', fingerprint),
    };
    this.sanctions = new ExitSanctions({
      catalog: this.catalog,
      table: this.table,
      bans: this.bans,
      banTtlMs: options.banTtlMs,
      now: this.now,
      eligible: (domains) => this.eligible(domains),
      freed: () => this.spreadOffSharedExits(),
      say,
    });
    const sharesAvoidably = (id: number): boolean => this.sharesAvoidably(id);
    this.fleet = new FleetYields(this.table, this.catalog, sharesAvoidably, say);
    this.egressReactions = new EgressReactions({
      table: this.table,
      catalog: this.catalog,
      egress: this.egress,
      sources: this.sources,
      sharesAvoidably,
      spread: (besides) => this.spreadOffSharedExits({ besides }),
      say,
    });
  }

  get unit(): DistinctUnit {
    return this.options.unit;
  }

  /** Refreshes the catalog every EXIT_CATALOG_REFRESH_MS through the instances' control ports, the newest first. */
  start(): void {
    this.timer ??= setInterval(() => {
      void this.refreshFromAnySource().then((ok) => {
        if (!ok && this.sources.size > 0) this.options.log.warn('the exit catalog could not be read through any instance; keeping the last one', { instances: [...this.sources.keys()] });
        this.egressReactions.tick();
        // A down hold or a ban that ended, or a relay new in the consensus, frees a relay.
        this.spreadOffSharedExits();
      });
    }, EXIT_CATALOG_REFRESH_MS);
    this.timer.unref();
  }

  /** One refresh, trying each known control port until one answers (a stopped tor does not). */
  async refreshFromAnySource(): Promise<boolean> {
    for (const getInfo of [...this.sources.values()].reverse()) {
      try {
        await this.refresh(getInfo);
        return true;
      } catch {
        // the next one
      }
    }
    return false;
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  async ensureCatalog(id: number, getInfo: GetInfo): Promise<void> {
    this.sources.delete(id);
    this.sources.set(id, getInfo);
    if (this.catalog.updatedAt > 0) return;
    await this.refresh(getInfo);
    // A list in a file is read before the first choice, so the first choices already see it.
    if (this.egress.listDue() && this.egress.listReadable()) await this.refreshExitList();
  }

  /** Reads the catalog again (one read at a time); instances whose exit left are reported. */
  refresh(getInfo: GetInfo): Promise<void> {
    this.refreshing ??= (async () => {
      try {
        const gone = new Set(await this.catalog.refresh(getInfo, this.now()));
        const affected = [...this.table.assigned].filter(([, a]) => gone.has(a.relay.fingerprint)).map(([id]) => id);
        if (affected.length > 0) {
          for (const id of affected) {
            const a = this.table.assigned.get(id) as { relay: ExitRelay };
            this.audit(id, `exit ${a.relay.nickname} (${a.relay.address}) of instance ${id} left the consensus`, { fingerprint: a.relay.fingerprint, reason: 'left_consensus' });
          }
          this.emit('exit-gone', affected);
        }
      } catch (error) {
        this.options.log.debug('reading the exit catalog failed', { error: errorMessage(error) });
        throw error;
      } finally {
        this.refreshing = undefined;
      }
    })();
    return this.refreshing;
  }

  /** Puts back what the durable state held: the exit each instance had, and the bans in force. */
  restore(assignments: ReadonlyMap<number, RestoredAssignment>, bans: readonly ExitBan[]): void {
    for (const [id, a] of assignments) this.table.restored.set(id, a);
    const now = this.now();
    for (const b of bans) this.bans.restore(b, now);
  }

  /** What the durable state keeps: each instance's exit (assigned, or restored and not yet claimed). */
  assignmentsToStore(): Map<number, RestoredAssignment> {
    return this.table.toStore();
  }

  /**
   * The exit instance `id` had before the restart, if it can have it again; audits when it
   * cannot. Other instances leave it alone while the catalog has enough exits (it is reserved);
   * in a shortage one may share it, and the session's IP still wins over distinctness.
   */
  private claimRestored(id: number, now: number): ExitRelay | undefined {
    const before = this.table.restored.get(id);
    if (!before) return undefined;
    this.table.restored.delete(id);
    const relay = this.catalog.get(before.fingerprint);
    let why = '';
    if (!relay) why = 'it left the consensus';
    else if (this.bans.isBanned(relay, now)) why = 'it is banned';
    else if (this.table.heldElsewhere.has(relay.fingerprint)) why = `node ${this.table.heldElsewhere.get(relay.fingerprint) ?? ''} holds it`;
    else if (this.options.exitNodes.length > 0 && this.options.strictNodes && !matchesNodeList(relay, this.options.exitNodes)) why = 'it is outside TOR_EXIT_NODES';
    if (relay && why === '') return relay;
    this.audit(id, `instance ${id} cannot get back its exit ${before.nickname} (${before.address}) from before the restart: ${why}; its sessions get a new exit`, {
      fingerprint: before.fingerprint,
      address: before.address,
      reason: 'restored_exit_unavailable',
      why,
    });
    return undefined;
  }

  next(id: number, options: NextExitOptions): NextExit {
    const now = this.now();
    const current = this.table.assigned.get(id)?.relay;
    if (!current && this.table.restored.has(id)) {
      const relay = this.claimRestored(id, now);
      if (relay) {
        // Kept even when it shares: the sessions restored on the instance keep their IP; the
        // shortage is said as any other is, and ends as any other does (spreadOffSharedExits).
        const distinct = !this.table.restoredShares(id, relay);
        const note = this.table.noteShortage(id, !distinct, 'its exit from before the restart');
        this.record(id, { relay, distinct, forSession: false }, { said: distinct ? 'again, as before the restart' : `again, as before the restart — ${note}`, why: 'restored' });
        return { ok: true, relay, distinct, note };
      }
    }
    const { input, avoidAddresses } = this.choiceInput(id, options, now);
    // A suspect exit only when no other qualifies, short of another instance's relay (chooseExit).
    const choice = chooseExit(input);
    if (!choice.ok) {
      const note =
        this.catalog.size === 0
          ? 'the exit catalog is empty'
          : `no eligible exit: ${this.catalog.size} in the catalog, ${this.bans.list(now).length} banned${this.table.heldElsewhere.size > 0 ? `, ${this.table.heldElsewhere.size} held by other nodes` : ''}${avoidAddresses.size > 0 ? `, ${avoidAddresses.size} recently used avoided` : ''}`;
      this.table.shortage.set(id, note);
      this.audit(id, `no new exit for instance ${id} (${options.why}): ${note}`, { reason: 'no_eligible_exit', why: options.why }, options.session);
      return { ok: false, note };
    }
    const { relay, distinct } = choice;
    const note = this.table.noteShortage(id, !distinct, 'every eligible exit');
    const forSession = options.session !== undefined || options.countries !== undefined || options.avoid !== undefined;
    this.record(id, { relay, distinct, forSession }, { said: distinct ? '' : `— ${note}`, why: options.why, from: current, session: options.session });
    return { ok: true, relay, distinct, note };
  }

  /**
   * What a choice for instance `id` weighs (`next`, and the check of `spreadOffSharedExits`):
   * every other instance's exit and the exits reserved since a restart are taken (`alsoTaken`
   * too); what is down, banned, held by another node, avoided or outside `countries` is excluded.
   */
  private choiceInput(id: number, options: NextExitOptions, now: number, alsoTaken: readonly ExitRelay[] = []): { input: ExitChoiceInput; avoidAddresses: Set<string> } {
    const current = this.table.assigned.get(id)?.relay;
    const avoidAddresses = new Set(options.avoid?.addresses ?? []);
    const avoidBlocks = new Set([...avoidAddresses].map(addressBlock));
    if (options.fresh && current) {
      avoidAddresses.add(current.address);
    }
    // Exits other instances had before a restart stay theirs until they ask for them.
    const taken = [...this.table.takenBesides(id), ...alsoTaken];
    const nodes = this.options.exitNodes;
    const excluded = (e: ExitRelay): boolean =>
      this.downs.isDown(e.fingerprint, now) ||
      this.bans.isBanned(e, now, options.avoid?.domains ?? []) ||
      this.table.heldElsewhere.has(e.fingerprint) ||
      avoidAddresses.has(e.address) ||
      avoidBlocks.has(e.block) ||
      (options.countries !== undefined && !options.countries.includes(e.country)) ||
      (options.fresh && current !== undefined && e.fingerprint === current.fingerprint);
    const input: ExitChoiceInput = {
      exits: this.catalog.all(),
      taken,
      takenElsewhere: this.table.unitsHeldElsewhere,
      unit: this.options.unit,
      excluded,
      ...(nodes.length > 0 ? { preferred: (e: ExitRelay) => matchesNodeList(e, nodes), strict: this.options.strictNodes } : {}),
      lastResort: (e) => this.isSuspect(e.fingerprint, now),
      random: this.random,
    };
    return { input, avoidAddresses };
  }

  /**
   * Instance `id` is assigned `assignment` from now on: kept and audited. `said` ends the
   * message, `why` is the request's reason, `from` the exit it leaves, `session` the session
   * whose request it was (the audit event is then a session event).
   */
  private record(id: number, assignment: Assignment, audit: { said: string; why: string; from?: ExitRelay | undefined; session?: string | undefined }): void {
    const { relay, distinct } = assignment;
    const { said, why, from, session } = audit;
    this.table.assigned.set(id, { relay, distinct, ...(assignment.forSession === true ? { forSession: true } : {}) });
    this.spreadSaid.delete(id);
    // The exit it left may have been the one another instance shared by necessity.
    this.table.endShortages();
    this.emit('assignments-changed');
    this.audit(id, `instance ${id} assigned exit ${relay.nickname} (${relay.address}, ${relay.country || '??'})${said ? ` ${said}` : ''}`, {
      fingerprint: relay.fingerprint,
      address: relay.address,
      block: relay.block,
      family: relay.family,
      country: relay.country,
      distinct,
      why,
      from: from?.fingerprint ?? null,
    }, session);
  }

  current(id: number): string | undefined {
    return this.table.assigned.get(id)?.relay.fingerprint;
  }

  /** Instance `id`'s tor could build no circuit through `fingerprint`: banned briefly (ExitSanctions). */
  unreachable(id: number, fingerprint: string): void {
    this.sanctions.unreachable(id, fingerprint);
  }

  /** Bans the exit instance `id` was assigned, for everyone or for `domain` (ExitSanctions.banAssigned). */
  banAssigned(id: number, cause: BanCause, reason: string, exitFingerprint: string, domain = ''): ExitBan | undefined {
    return this.sanctions.banAssigned(id, cause, reason, exitFingerprint, domain);
  }

  /** Whether an exit (by fingerprint or address) is banned for everyone or for one of `domains`. */
  bannedFor(exit: { fingerprint: string; address: string }, domains: readonly string[]): boolean {
    return this.sanctions.bannedFor(exit, domains);
  }

  /** An exit quarantined on one party's reports: chosen last until `until` (ExitSanctions.markSuspect). */
  markSuspect(fingerprint: string, until: number): void {
    this.sanctions.markSuspect(fingerprint, until);
  }

  isSuspect(fingerprint: string, now: number = this.now()): boolean {
    return this.sanctions.isSuspect(fingerprint, now);
  }

  /** What banning `fingerprint` would leave eligible, in all and in its country (ExitSanctions.eligibleAfterBan). */
  eligibleAfterBan(fingerprint: string, domain = ''): { catalog: number; eligible: number; country: string; eligibleInCountry: number } {
    return this.sanctions.eligibleAfterBan(fingerprint, domain);
  }

  /** Lifts a ban by hand; false when there was none. */
  liftBan(fingerprint: string): boolean {
    return this.sanctions.liftBan(fingerprint);
  }

  /** A ban another node of the fleet made: in force here too (a longer one already here stands). */
  applyFleetBan(ban: ExitBan): void {
    this.sanctions.applyFleetBan(ban);
  }

  /** A ban lifted on another node of the fleet: lifted here too. */
  applyFleetLift(fingerprint: string): void {
    this.sanctions.applyFleetLift(fingerprint);
  }

  /** The instance left the pool (or is restarting afresh): its exit is free for others. */
  release(id: number): void {
    this.sources.delete(id);
    this.egress.forget(id);
    this.table.restored.delete(id);
    this.table.shortage.delete(id);
    this.spreadSaid.delete(id);
    if (this.table.assigned.delete(id)) {
      this.emit('assignments-changed');
      this.spreadOffSharedExits();
    }
  }

  /** Exits this node holds leases on: those assigned, and those kept for instances since a restart. */
  heldFingerprints(): Set<string> {
    return this.table.heldFingerprints();
  }

  /** Tells which instances serve no session (the pool's session table): only they move off a shared relay. */
  setIdle(idle: (id: number) => boolean): void {
    this.idle = idle;
  }

  /** The exits other nodes hold (fingerprint → node), as the fleet last read them. */
  setHeldElsewhere(held: ReadonlyMap<string, string>): void {
    this.table.heldElsewhere = held;
    // A lease that lapsed (its node died) or was given back frees a relay. Not yet a unit: the
    // fleet reads the units other nodes hold right after (setUnitsHeldElsewhere), and a dead
    // node's unit leases lapse with its exits', so a unit pass now would move an instance off a
    // /24 that is about to be its own.
    this.spreadOffSharedExits({ units: false, besides: this.fleet.toldToMove() });
  }

  /** The units beyond the relay this node's instances hold as distinct, key → fingerprint: the fleet leases them (AssignmentTable.heldUnits). */
  heldUnits(): Map<string, string> {
    return this.table.heldUnits();
  }

  /**
   * The units other nodes hold (key → node), as the fleet last read them: a choice keeps its
   * distance from them too. A unit that lapsed (its node moved, stopped or died) ends the
   * shortages it caused: an instance that shared it by necessity and shares no longer is
   * distinct again (leased from the next renewal), and an idle one that still shares moves to a
   * unit of its own when one is free (`spreadOffSharedExits`).
   */
  setUnitsHeldElsewhere(held: ReadonlyMap<string, string>): void {
    this.table.unitsHeldElsewhere = held;
    this.spreadOffSharedExits({ besides: this.fleet.toldToMove() });
    this.fleet.renewalDone();
  }

  /** The node holding unit `key`, if another does. */
  unitHolderOf(key: string): string | undefined {
    return this.table.unitsHeldElsewhere.get(key);
  }

  /** Another node holds the lease on a unit instances here were assigned as distinct (FleetYields.yieldUnit). */
  yieldUnit(key: string, node: string): void {
    this.fleet.yieldUnit(key, node);
  }

  /** The node that holds `fingerprint`'s lease, if another does. */
  holderOf(fingerprint: string): string | undefined {
    return this.table.heldElsewhere.get(fingerprint);
  }

  /** Another node holds the lease on an exit instances here were assigned (FleetYields.yieldExit). */
  yieldExit(fingerprint: string, node: string): void {
    this.fleet.yieldExit(fingerprint, node);
  }

  assignment(id: number): ExitAssignmentView | undefined {
    const a = this.table.assigned.get(id);
    if (!a) return undefined;
    const { fingerprint, nickname, address, country, block, family } = this.catalog.get(a.relay.fingerprint) ?? a.relay;
    return { fingerprint, nickname, address, country, block, family, distinct: a.distinct, ...addressFieldsOf(this.catalog.get(fingerprint) ?? a.relay), down: this.downViewOf(fingerprint) };
  }

  shortageOf(id: number): string {
    return this.table.shortage.get(id) ?? '';
  }

  /** Assigned exits in use by more than one instance's unit: 0 while the catalog is big enough. */
  assignedCount(): number {
    return new Set([...this.table.assigned.values()].map((a) => a.relay.fingerprint)).size;
  }

  /** Whether an exit in one of `countries` could be assigned now (in the catalog, not banned, within a strict TOR_EXIT_NODES). */
  hasEligibleIn(countries: readonly string[]): boolean {
    return this.eligible().some((e) => countries.includes(e.country));
  }

  /** Exits an instance could be assigned now (usable, not banned, within TOR_EXIT_NODES when strict). */
  eligibleCount(): number {
    return this.eligible().length;
  }

  /** Distinct units (EXIT_DISTINCT) among the eligible exits: how many instances can have their own. */
  distinctCapacity(): number {
    // Greedy count of exits that share no unit with one counted before: a lower bound of the capacity.
    const used = new Set<string>(this.table.unitsHeldElsewhere.keys());
    let n = 0;
    for (const e of this.eligible()) {
      const keys = distinctKeys(e, this.options.unit);
      if (keys.some((k) => used.has(k))) continue;
      for (const k of keys) used.add(k);
      n++;
    }
    return n;
  }

  /** Usable exits that are not banned (for everyone, or for one of `domains`), not held by another node, within a strict TOR_EXIT_NODES. */
  private eligible(domains: readonly string[] = []): ExitRelay[] {
    const now = this.now();
    const nodes = this.options.exitNodes;
    const strict = nodes.length > 0 && this.options.strictNodes;
    return this.catalog
      .all()
      .filter((e) => !this.downs.isDown(e.fingerprint, now))
      .filter((e) => !this.bans.isBanned(e, now, domains) && !this.table.heldElsewhere.has(e.fingerprint) && (!strict || matchesNodeList(e, nodes)));
  }

  // ---- exits that die (README.md, "Exits that die") ----

  /**
   * The pool's own evidence says `fingerprint` is dead (instance `id`'s tor found it): it is
   * assigned to no instance for its hold (exit-downs.ts), and audited. Returns the instances
   * assigned it now (each needs another exit), or undefined for a relay the pool does not know.
   */
  markDown(id: number | null, fingerprint: string, evidence: readonly string[]): { down: ExitDown; instances: number[] } | undefined {
    const assigned = id === null ? undefined : this.table.assigned.get(id)?.relay;
    const relay = this.catalog.get(fingerprint) ?? (assigned?.fingerprint === fingerprint ? assigned : undefined);
    if (!relay) return undefined;
    const now = this.now();
    const { down, fresh } = this.downs.markDown(relay, id, evidence, now);
    const instances = this.assignedInstances(fingerprint);
    if (fresh) {
      const again = down.strikes > 1 ? ` (dead again within its probation: strike ${down.strikes})` : '';
      this.audit(id, `exit ${relay.nickname} (${relay.address}) is down${again}: ${evidence.length} failure${evidence.length === 1 ? '' : 's'} seen by instance ${id ?? '?'}'s tor; assigned to no instance until ${new Date(down.until).toISOString()}`, {
        fingerprint: relay.fingerprint,
        address: relay.address,
        reason: 'exit_down',
        until: new Date(down.until).toISOString(),
        probation_until: new Date(down.probationUntil).toISOString(),
        strikes: down.strikes,
        evidence: down.evidence,
        instances,
      });
    }
    return { down, instances };
  }

  /** Whether `fingerprint` is down now (assigned to no instance); not while on probation. */
  isDown(fingerprint: string): boolean {
    return this.downs.isDown(fingerprint, this.now());
  }

  /** The down (or probation) entry of a relay, as the API shows it; null when it has none. */
  downViewOf(fingerprint: string): ExitDownView | null {
    const now = this.now();
    const d = this.downs.get(fingerprint, now);
    return d ? exitDownViewOf(d, now) : null;
  }

  /** Every relay down or on probation, as the API shows them. */
  downViews(): ExitDownView[] {
    const now = this.now();
    return this.downs.list(now).map((d) => exitDownViewOf(d, now));
  }

  assignedInstances(fingerprint: string): number[] {
    return this.table.instancesOn(fingerprint);
  }

  // ---- what sites see: egress addresses (README.md, "What sites see") ----

  egressPinned(id: number, fingerprint: string, socks: ProbeRoute, settling: boolean): Promise<{ keep: boolean }> {
    return this.egressReactions.pinned(id, fingerprint, socks, settling);
  }

  egressOf(fingerprint: string): { address: string; country: string } | undefined {
    const relay = this.catalog.get(fingerprint);
    return relay && relay.addressSource !== 'published' ? { address: relay.address, country: relay.country } : undefined;
  }

  /** An exit's address fields for the instance view: the published address, where `exit_ip` comes from, and when it was seen. */
  addressOf(fingerprint: string): { published: string; source: AddressSource; measuredAt: number | null } | undefined {
    const relay = this.catalog.get(fingerprint);
    return relay ? { published: relay.published, source: relay.addressSource, measuredAt: relay.measuredAt } : undefined;
  }

  /** The probes' cost so far. */
  egressStats(): EgressProbeStats & { probing: boolean; exitList: boolean } {
    return { ...this.egress.stats(), probing: this.egress.probing, exitList: this.options.egress?.exitList !== undefined && this.options.egress.exitList !== '' };
  }

  /** Reads EXIT_LIST again and reacts to the addresses it changed. */
  refreshExitList(): Promise<void> {
    return this.egressReactions.refreshList();
  }

  /**
   * A shortage ends as soon as it can (README.md, "Shortage"): an instance assigned in one that
   * shares nothing any more is distinct again; instances on a relay another instance here holds
   * (one relay twice is one IP twice) move once a relay of their own is free, and instances
   * sharing a /24 or family once a unit of their own is, as many as are free, one staying on
   * each (exit-spread.ts). Only an idle instance moves, on an exit the pool chose for itself: a
   * move changes the IP of the sessions on it, which is what a session keeps an instance for.
   * Each is checked with the choice its move will make, so it only moves when that choice gives
   * it what it lacks. Instances that found no eligible exit at all (left to tor's own selection,
   * which keeps no IP for a session either) are given one first, as soon as any is eligible. Run
   * when an exit may have come free: another node's leases read, an instance released, every
   * catalog refresh (a down hold or a ban ended, an address measured anew).
   */
  private spreadOffSharedExits({ units = true, besides = new Set<number>() }: { units?: boolean; besides?: ReadonlySet<number> } = {}): void {
    if (units && this.table.endShortages().length > 0) this.emit('assignments-changed');
    const now = this.now();
    const moving = instancesToSpread({
      assigned: this.table.assigned,
      reserved: this.table.restored,
      unpinned: [...this.table.shortage.keys()].filter((id) => !this.table.assigned.has(id) && !this.table.restored.has(id)),
      // A move changes the IP of every session on the instance, and one placed for a session's own
      // request would undo it: a shared exit is left by an idle instance on the pool's own choice.
      movable: (id) => this.idle(id) && this.table.assigned.get(id)?.forSession !== true,
      // Told to move already (the fleet's yields this renewal, an egress conflict): not told twice.
      moving: besides,
      choose: (id, claimed) => chooseExit(this.choiceInput(id, { fresh: true, why: 'spread' }, now, claimed).input),
      ...(units ? { sharesUnit: (id: number, leaving: ReadonlySet<number>, arriving: readonly ExitRelay[]) => this.table.sharesUnit(id, leaving, arriving) } : {}),
    });
    for (const id of moving) {
      const relay = this.table.assigned.get(id)?.relay;
      // Said once per relay: an instance not ready to move (bootstrapping, quarantined) is asked again at the next check.
      const on = relay?.fingerprint ?? '';
      if (this.spreadSaid.get(id) === on) continue;
      this.spreadSaid.set(id, on);
      if (!relay) {
        this.audit(id, `instance ${id} has no exit assigned (${this.table.shortage.get(id) ?? 'none was eligible'}) and one is eligible now: it is given one`, { reason: 'exit_eligible_again' });
        continue;
      }
      const onRelay = this.assignedInstances(relay.fingerprint).filter((other) => other !== id);
      if (onRelay.length > 0) {
        this.audit(id, `instance ${id} shares exit ${relay.nickname} (${relay.address}) with ${instancesWord(onRelay)} while a relay of its own is free: it moves to another exit`, {
          fingerprint: relay.fingerprint,
          address: relay.address,
          sharing_with: onRelay,
          reason: 'relay_shared',
        });
        continue;
      }
      const keys = distinctKeys(relay, this.options.unit).filter((k) => !k.startsWith('relay:'));
      const inUnit = [...this.table.assigned].filter(([other, a]) => other !== id && distinctKeys(a.relay, this.options.unit).some((k) => keys.includes(k))).map(([other]) => other);
      this.audit(id, `exit ${relay.nickname} (${relay.address}) of instance ${id} shares its ${this.table.unitWord()} with ${inUnit.length > 0 ? instancesWord(inUnit) : 'another node\'s exit'} while one of its own is free: it moves to another exit`, {
        fingerprint: relay.fingerprint,
        address: relay.address,
        block: relay.block,
        sharing_with: inUnit,
        reason: 'unit_shared',
      });
    }
    if (moving.length > 0) this.emit('exit-gone', moving);
  }

  /** Whether instance `id`'s exit shares a unit with another instance's (here or, leased, on another node) while an eligible exit shares none. */
  private sharesAvoidably(id: number): boolean {
    const now = this.now();
    return this.table.sharesAvoidably(id, () => this.eligible(), (fingerprint) => this.isSuspect(fingerprint, now));
  }

  private audit(instance: number | null, message: string, details: Record<string, unknown>, session?: string): void {
    this.options.audit.record({ type: 'exit', instance, session: session ?? null, message, details });
  }
}

/** The address fields of an exit view (GET /api/exits, assigned_exit): what the consensus publishes, and where `address` comes from. */
export function addressFieldsOf(relay: ExitRelay): { published_address: string; address_source: AddressSource; address_measured_at: string | null; seen_addresses: string[] } {
  return {
    published_address: relay.published,
    address_source: relay.addressSource,
    address_measured_at: relay.measuredAt === null ? null : new Date(relay.measuredAt).toISOString(),
    seen_addresses: [...relay.seen],
  };
}
