import type { Config } from '../../shared/config/index.js';
import { ExitpoolError } from '../../shared/errors/catalogue.js';
import type { CloseRecord, DestinationProbe, DestinationProbeResult, ReachedHost } from '../../shared/ipc/protocol.js';
import type { Logger } from '../../shared/logger.js';
import type { AuditLog } from '../audit/audit-log.js';
import type { ExitAssignments } from '../exits/exit-assignments.js';
import type { EgressProbeFailure } from '../exits/exit-egress.js';
import type { FailureKind, QuarantineCause } from '../health/health-tracker.js';
import { failureWeights } from '../health/weights.js';
import type { SessionTable } from '../sessions/session-table.js';
import { BanGuard } from './ban-guard.js';
import type { BudgetCounters } from './budget-counter.js';
import { ReportBudget, reporterKey, RoutableFloorGuard, type Reporter } from './client-evidence.js';
import { DestinationBlame } from './destination-blame.js';
import { ExitComplaints, type Complaint } from './exit-complaints.js';
import { classifyFailure } from './failure-classes.js';
import type { PartyOf } from './parties.js';
import { PendingSuccesses } from './pending-successes.js';
import type { JudgedInstance, VerdictSubjects } from './verdict-subjects.js';
import { VisitLog } from './visit-log.js';

/** Sites a session remembers from its reports. */
const MAX_SESSION_DOMAINS = 5;
const HOUR_MS = 3_600_000;

export type VerdictsConfig = Pick<
  Config,
  | 'clientReportBudget'
  | 'minRoutable'
  | 'failureWindowMs'
  | 'quarantineFailures'
  | 'banReporters'
  | 'banReportWindowMs'
  | 'clientBanBudget'
  | 'minEligibleExits'
  | 'minEligibleExitsPerCountry'
  | 'banRateAlert'
>;

export interface VerdictsDeps {
  config: VerdictsConfig;
  subjects: VerdictSubjects;
  sessions: SessionTable;
  audit: AuditLog;
  log: Logger;
  now: () => number;
  /** Who stands behind a credential (parties.ts); absent: every credential is its own party. */
  partyOf?: PartyOf;
  /** The exit catalog, assignments and bans (PIN_EXIT_RELAY); absent: nothing is banned. */
  exits?: ExitAssignments;
  /** Dials a destination through an instance (a proxy worker does); absent: destination-dependent failures are never judged. */
  probeDestination?: (probe: DestinationProbe) => Promise<DestinationProbeResult | null>;
  /** A failure was found to be the destination's fault (metrics). */
  onDestinationFault?: () => void;
  /** The per-credential budgets' counters (a fleet's count across its nodes); absent: each node counts its own. */
  budgets?: BudgetCounters;
}

/** What a client's report decided; the pool carries out the moves (its own session first). */
export interface ReportVerdict {
  session: string;
  /** The instance the report was charged to: the one the session was on. */
  instance: number;
  kind: FailureKind;
  /** Within the reporter's CLIENT_REPORT_BUDGET: weighed against the exit. */
  scored: boolean;
  /** Sessions to move off the reported exit: the reported one, then the others its credential used through that exit. */
  move: string[];
}

const noSuchSession = (): ExitpoolError => new ExitpoolError('EXITPOOL_NO_SUCH_SESSION', 'no such session');

/**
 * The one place that decides what evidence earns (README.md here): a client's failure report,
 * a connection's outcome, a destination's check. Evidence is weighed on the instance's health;
 * what the exit earns (a ban for one site, a ban for everyone, suspicion, nothing) is decided
 * here, from independent parties, within budgets and floors. Nothing else bans an exit for its
 * reputation.
 */
export class Verdicts {
  private readonly reportBudget: ReportBudget;
  private readonly floor: RoutableFloorGuard;
  private readonly banGuard: BanGuard;
  private readonly pendingSuccesses = new PendingSuccesses();
  private readonly complaints = new ExitComplaints();
  private readonly visits = new VisitLog();
  /** The kind of each instance's latest scored failure: whether a quarantine it leads to casts suspicion on the exit. */
  private readonly lastFailureKind = new Map<number, FailureKind>();
  /** A destination failure is checked through another exit before it counts against this one. */
  private readonly blame: DestinationBlame | null;
  private readonly partyOf: PartyOf;
  private banRateAlertedAt = Number.NEGATIVE_INFINITY;

  constructor(private readonly deps: VerdictsDeps) {
    const { config } = deps;
    this.reportBudget = new ReportBudget(config.clientReportBudget, deps.now, deps.budgets?.('report', config.clientReportBudget));
    this.floor = new RoutableFloorGuard(config.minRoutable, deps.log);
    const floors = { minEligibleExits: config.minEligibleExits, minEligibleExitsPerCountry: config.minEligibleExitsPerCountry };
    this.banGuard = new BanGuard(config.clientBanBudget, floors, deps.now, deps.budgets?.('ban', config.clientBanBudget));
    this.partyOf = deps.partyOf ?? ((credential) => credential);
    const probe = deps.probeDestination;
    this.blame = probe
      ? new DestinationBlame(async ({ host, port }, except) => {
          const socks = deps.subjects.probeRoute(except);
          return socks === null ? null : probe({ socks, host, port });
        }, deps.now)
      : null;
    // Every ban this node makes counts towards the hourly rate (BAN_RATE_ALERT), whoever made it.
    deps.exits?.on('banned', () => this.countBan());
    deps.exits?.on('egress-failed', (failure) => this.egressProbeFailed(failure));
  }

  // ---- a client's report ----

  /**
   * A client's report about a request through `key`. It always moves the reporter's own session
   * (and the sessions its credential used through the same exit): that harms no one else, so it
   * is not budgeted. What it does to others (weight on the instance, a share in a ban) is budgeted
   * per credential and bounded by the floors.
   */
  reportFailure(key: string, kind: FailureKind, reason: string, reporter: Reporter, domain = ''): ReportVerdict {
    const { sessions, subjects, audit, config } = this.deps;
    const s = sessions.get(key);
    if (!s) throw noSuchSession();
    // Read the instance first: a quarantine the report causes moves the session at once.
    const instance = s.instance;
    const e = subjects.judged(instance);
    const now = this.deps.now();
    const credential = reporterKey(reporter);
    const exit = e ? exitIdOf(e, this.deps.exits) : '';
    s.failures += 1;
    this.pendingSuccesses.reported(instance, key, now);
    const scored = this.reportBudget.take(reporter);
    // A site counts only when the session reached it through the exit it blames.
    const siteSeen = domain !== '' && exit !== '' && this.visits.visited(key, exit, domain, now - config.banReportWindowMs);
    audit.record({
      type: 'instance',
      instance,
      session: key,
      message: `failure reported on instance ${instance}: ${kind}${reason ? ` (${reason})` : ''}${scored ? '' : ' (not scored: over CLIENT_REPORT_BUDGET)'}`,
      details: { kind, reason, scored, reporter: reporterKey(reporter), ...(domain !== '' ? { domain, site_seen: siteSeen } : {}) },
    });
    if (domain !== '') s.domains = [...s.domains.filter((d) => d !== domain), domain].slice(-MAX_SESSION_DOMAINS);
    sessions.markChanged(key);
    // Who else this credential sent through the exit (read before anything moves).
    const others = exit === '' ? [] : this.visits.sessionsUsing(credential, exit, now - config.failureWindowMs).filter((k) => k !== key && sessions.get(k)?.instance === instance);
    if (e) {
      if (scored) this.lastFailureKind.set(instance, kind);
      const complaint = scored && exit !== '' && (kind === 'captcha' || kind === 'blocked');
      if (complaint) {
        this.complaints.add(exit, { party: this.partyOf(credential), credential, kind, weight: failureWeights(config.quarantineFailures)[kind], domain: siteSeen ? domain : '', at: now });
      }
      // A complaint the site ban answers is weighed without quarantining; the ban settles it.
      const siteBan = complaint && siteSeen ? this.siteBanPermitted(exit, domain, now) : null;
      e.health.failure(kind, 'client', scored, now, {
        mayQuarantine: siteBan === null && this.clientEvidenceMayQuarantine(instance),
        ...(siteSeen ? { site: domain } : {}),
      });
      if (siteBan) this.banForSite(e, exit, kind as 'captcha' | 'blocked', domain, siteBan.credentials, now);
      if (complaint) this.considerBanForEveryone(e, exit, kind as 'captcha' | 'blocked', now);
    }
    return { session: key, instance, kind, scored, move: [key, ...others] };
  }

  // ---- connections (the ledger's ConnectionOutcomes) ----

  /** A connection that worked: a session's success waits SUCCESS_REPORT_GRACE_MS for a report about it. */
  connectionSucceeded(r: CloseRecord, now: number): void {
    this.recordVisit(r);
    if (r.key !== null) this.pendingSuccesses.hold(r.instance, r.key, Math.min(now, r.endedAt));
    else this.deps.subjects.judged(r.instance)?.health.success(now, r.endedAt);
  }

  /**
   * A failed connection, by what it is evidence of (failure-classes.ts): the tor process's own
   * failure is scored; one that depends on the client's destination is scored only once the
   * destination was checked through another exit and works there, and then on the connection's
   * credential's budget; the rest (excused, the destination's, unknown) are counted, never scored.
   */
  connectionFailed(r: CloseRecord): void {
    this.recordVisit(r);
    const weigh = (scored: boolean, dependsOnClient: boolean): void => {
      const e = this.deps.subjects.judged(r.instance);
      if (!e) return;
      if (scored) this.lastFailureKind.set(r.instance, 'transport');
      const mayQuarantine = !dependsOnClient || this.clientEvidenceMayQuarantine(r.instance);
      e.health.failure('transport', 'transport', scored, this.deps.now(), { occurredAt: r.endedAt, mayQuarantine });
    };
    const cls = classifyFailure(r.failure);
    switch (cls.kind) {
      case 'tor':
        return weigh(true, false);
      case 'excused':
      case 'unknown':
        return weigh(false, false);
      case 'destination': {
        if (!this.blame) return weigh(false, false);
        this.blame.judge(cls.destination, cls.outcome, r.instance, (verdict) => {
          if (verdict === 'destination') this.deps.onDestinationFault?.();
          // Blamed on the exit: the client chose the destination, so it spends its credential's budget.
          weigh(verdict === 'exit' && this.reportBudget.takeCredential(r.credential), true);
        });
        return;
      }
    }
  }

  // ---- the pool's own probes ----

  /**
   * A probe through an instance's exit to the IP-echo service found no address (supervisor/exits,
   * "What sites see"): the pool's own evidence about the exit, never charged to a credential.
   * It is the exit's fault only when the echo service answered through another exit within
   * ECHO_ALIVE_MS: then it weighs as a transport failure on the instance (health's rules apply:
   * not while the instance is starting, rotating or within ROTATION_GRACE of a rotation, where
   * it is counted only). Otherwise the service itself may be down: nobody is blamed.
   */
  egressProbeFailed(f: EgressProbeFailure): void {
    const e = this.deps.subjects.judged(f.instance);
    if (!e) return;
    if (!f.echoAnswered) {
      this.deps.log.debug('egress probe failed with no answer through any other exit either: nobody blamed', { instance: f.instance, fingerprint: f.fingerprint, failure: f.failure });
      return;
    }
    this.lastFailureKind.set(f.instance, 'transport');
    e.health.failure('transport', 'transport', true, this.deps.now(), { occurredAt: f.at });
  }

  // ---- health's own verdicts ----

  /**
   * Health took an instance out of service on its own scoring: its sessions move at once. An
   * exit burnt by captchas or blocks is banned for everyone only on independent parties' word
   * (considerBanForEveryone, at each report); quarantined on one party's word, it is suspect for
   * BAN_REPORT_WINDOW: chosen only when no other exit qualifies, and any other party's complaint
   * within it can ban it.
   */
  quarantined(id: number, cause: Exclude<QuarantineCause, 'manual'>): void {
    const e = this.deps.subjects.judged(id);
    if (!e) return;
    const kind = this.lastFailureKind.get(id);
    const exits = this.deps.exits;
    const fingerprint = fingerprintOf(e, exits);
    if (exits && (kind === 'captcha' || kind === 'blocked') && fingerprint !== '' && !exits.bannedFor({ fingerprint, address: e.instance.exit().exitIp }, [])) {
      exits.markSuspect(fingerprint, this.deps.now() + this.deps.config.banReportWindowMs);
      this.deps.log.info('exit quarantined on one party’s reports: suspect, not banned', { instance: id, cause, fingerprint });
    }
    this.deps.subjects.moveSessionsOff(id, { reason: 'quarantine' });
  }

  // ---- the pool's own evidence that an exit is dead ----

  /**
   * Instance `id`'s tor found its pinned exit dead (supervisor/tor/exit-liveness.ts: circuits to
   * it failing through different middles, none built). The pool's own evidence about the exit:
   * it acts at once and is charged to no credential, and it earns no ban (a dead relay is not a
   * burnt address). The exit is down (ExitAssignments: a short hold, then probation); every
   * instance assigned it loses it: its sessions move to live exits (reason exit_down), and one on
   * probation is quarantined (its remediation gave it an exit that does not work: SPEC, "probation
   * | a failure"). Returns those instances: the pool gives the routable ones a new exit.
   */
  exitDown(id: number, fingerprint: string, evidence: readonly string[]): number[] {
    const { exits, subjects } = this.deps;
    const marked = exits?.markDown(id, fingerprint, evidence);
    const ids = [...new Set([id, ...(marked?.instances ?? [])])];
    const now = this.deps.now();
    for (const i of ids) {
      const e = subjects.judged(i);
      if (!e) continue;
      subjects.moveSessionsOff(i, { reason: 'exit_down' });
      e.health.exitDown(now);
    }
    return ids;
  }

  /** The operator released the instance: the complaints about its exit are forgiven. */
  released(id: number): void {
    const e = this.deps.subjects.judged(id);
    if (e) this.complaints.clear(exitIdOf(e, this.deps.exits));
  }

  /** The instance left the pool. */
  forgetInstance(id: number): void {
    this.pendingSuccesses.forgetInstance(id);
    this.lastFailureKind.delete(id);
  }

  /** Hands the successes whose report grace is over to health. */
  tick(now: number): void {
    this.pendingSuccesses.release(now, (id, endedAt) => this.deps.subjects.judged(id)?.health.success(now, endedAt));
  }

  /** Shutdown: says what the routable floor withheld. */
  flush(): void {
    this.floor.flush();
  }

  /** Bans in the last hour (pool_exit_bans_last_hour). */
  bansLastHour(): number {
    return this.banGuard.bansLastHour();
  }

  /** Whether the bans of the last hour are above BAN_RATE_ALERT. */
  banRateExceeded(): boolean {
    return this.banGuard.bansLastHour() > this.deps.config.banRateAlert;
  }

  // ---- the rules ----

  /** Whether evidence the client controls may take instance `id` out of service (MIN_ROUTABLE). */
  private clientEvidenceMayQuarantine(id: number): boolean {
    const { subjects } = this.deps;
    if (!subjects.routableId(id)) return true;
    return this.floor.allows(subjects.routableCount(), subjects.poolSize(), id);
  }

  /**
   * A ban for one site is earned by complaints naming it (from sessions that reached it through
   * this exit) whose weight reaches QUARANTINE_FAILURES, within the complaining credentials'
   * CLIENT_BAN_BUDGET and the eligible-exit floors for that site. Null when not earned or withheld.
   */
  private siteBanPermitted(exit: string, domain: string, now: number): { credentials: string[] } | null {
    const { config, exits } = this.deps;
    if (!exits) return null;
    const since = now - config.failureWindowMs;
    if (this.complaints.siteWeight(exit, domain, since) < config.quarantineFailures) return null;
    const credentials = [...new Set(this.complaints.recent(exit, since).filter((c) => c.domain === domain).map((c) => c.credential))];
    const permitted = this.banGuard.permits(credentials, exits.eligibleAfterBan(exit, domain));
    if (!permitted.ok) {
      this.withheld(exit, domain, permitted.why);
      return null;
    }
    return { credentials };
  }

  /**
   * Complaints that all named one site: the exit is banned for that site (EXIT_BAN_TTL); the
   * sessions that reached the site through it, and those that reported it, move to exits not
   * banned for it; only that site's complaints are settled, so every other piece of evidence (the
   * pool's own included) stays, and the exit keeps serving the rest.
   */
  private banForSite(e: JudgedInstance, exit: string, kind: 'captcha' | 'blocked', domain: string, credentials: readonly string[], now: number): void {
    const { exits, config, sessions, subjects } = this.deps;
    const id = e.instance.id;
    const fingerprint = fingerprintOf(e, exits);
    if (!exits || fingerprint === '') return;
    exits.banAssigned(id, kind, `instance ${id}: ${kind} reports on ${domain}`, fingerprint, domain);
    this.banGuard.spend(credentials);
    this.complaints.settleSite(exit, domain);
    e.health.settleSite(domain, now);
    const since = now - config.banReportWindowMs;
    const keys = new Set([...this.visits.sessionsVisiting(exit, domain, since), ...sessions.keysOn(id).filter((k) => sessions.get(k)?.domains.includes(domain))]);
    subjects.moveSessionsOff(id, { reason: 'site_ban', domain, keys });
  }

  /**
   * A ban for everyone is earned by complaints from BAN_REPORTERS independent parties within
   * BAN_REPORT_WINDOW that do not all name one site (that is a site's matter), within the
   * complaining credentials' CLIENT_BAN_BUDGET and the eligible-exit floors. The instances on it
   * move to other exits (ExitAssignments: exit-gone).
   */
  private considerBanForEveryone(e: JudgedInstance, exit: string, kind: 'captcha' | 'blocked', now: number): void {
    const { exits, config } = this.deps;
    const fingerprint = fingerprintOf(e, exits);
    if (!exits || fingerprint === '' || exits.bannedFor({ fingerprint, address: e.instance.exit().exitIp }, [])) return;
    const recent = this.complaints.recent(exit, now - config.banReportWindowMs);
    const byParty = new Map<string, Complaint>();
    for (const c of recent) byParty.set(c.party, c);
    if (byParty.size < config.banReporters) return;
    const sites = new Set(recent.map((c) => c.domain));
    if (sites.size === 1 && !sites.has('')) return;
    const credentials = [...byParty.values()].map((c) => c.credential);
    const permitted = this.banGuard.permits(credentials, exits.eligibleAfterBan(fingerprint));
    if (!permitted.ok) return this.withheld(exit, '', permitted.why);
    const id = e.instance.id;
    exits.banAssigned(id, kind, `${byParty.size} independent reporters (${[...byParty.keys()].join(', ')}) within BAN_REPORT_WINDOW`, fingerprint, '');
    this.banGuard.spend(credentials);
    this.complaints.clear(exit);
  }

  private withheld(exit: string, domain: string, why: string): void {
    this.deps.audit.record({
      type: 'exit',
      instance: null,
      message: `ban of exit ${exit}${domain === '' ? '' : ` for ${domain}`} withheld: ${why}`,
      details: { fingerprint: exit, domain, reason: 'ban_withheld', why },
    });
  }

  private countBan(): void {
    const lastHour = this.banGuard.counted();
    const now = this.deps.now();
    if (lastHour <= this.deps.config.banRateAlert || now - this.banRateAlertedAt < HOUR_MS) return;
    this.banRateAlertedAt = now;
    this.deps.audit.record({
      type: 'exit',
      instance: null,
      message: `${lastHour} exit bans in the last hour, more than BAN_RATE_ALERT (${this.deps.config.banRateAlert}): are sites blocking the pool, or is a client reporting in bulk?`,
      details: { reason: 'ban_rate', bans_last_hour: lastHour, threshold: this.deps.config.banRateAlert },
    });
  }

  /**
   * A session's connection started towards a host (sent as its dial starts: a client reports a
   * captcha while its tunnel is still open). The exit is the instance's at that moment.
   */
  connectionStarted(r: ReachedHost): void {
    this.recordVisit({ key: r.key, instance: r.instance, host: r.host, credential: r.credential, endedAt: r.at });
  }

  private recordVisit(r: Pick<CloseRecord, 'key' | 'instance' | 'host' | 'credential' | 'endedAt'>): void {
    if (r.key === null || r.host === '') return;
    const e = this.deps.subjects.judged(r.instance);
    if (!e) return;
    const exit = exitIdOf(e, this.deps.exits);
    if (exit !== '') this.visits.record(r.key, { host: r.host, exit, credential: r.credential, at: r.endedAt });
  }
}

/** The relay an instance leaves through: the one traffic confirmed, else its assignment. */
function fingerprintOf(e: JudgedInstance, exits: ExitAssignments | undefined): string {
  return e.instance.exit().exitFingerprint || exits?.current(e.instance.id) || '';
}

/** An exit as evidence is filed under: its relay's fingerprint, else (tor's own choice, unpinned) its address. */
function exitIdOf(e: JudgedInstance, exits: ExitAssignments | undefined): string {
  return fingerprintOf(e, exits) || e.instance.exit().exitIp;
}
