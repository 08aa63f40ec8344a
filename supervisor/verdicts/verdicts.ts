import type { FailureResult } from '../../shared/api/views.js';
import type { Config } from '../../shared/config/index.js';
import { ExitpoolError } from '../../shared/errors/catalogue.js';
import type { CloseRecord, DestinationProbe, DestinationProbeResult } from '../../shared/ipc/protocol.js';
import type { Logger } from '../../shared/logger.js';
import type { AuditLog } from '../audit/audit-log.js';
import type { ExitAssignments } from '../exits/exit-assignments.js';
import type { FailureKind, QuarantineCause } from '../health/health-tracker.js';
import type { SessionTable } from '../sessions/session-table.js';
import { dependsOnClient, ReportBudget, reporterKey, RoutableFloorGuard, type Reporter } from './client-evidence.js';
import { DestinationBlame } from './destination-blame.js';
import { PendingSuccesses } from './pending-successes.js';
import { SiteComplaints } from './site-complaints.js';
import type { JudgedInstance, VerdictSubjects } from './verdict-subjects.js';

/** Sites a session remembers from its reports. */
const MAX_SESSION_DOMAINS = 5;

export interface VerdictsDeps {
  config: Pick<Config, 'clientReportBudget' | 'minRoutable' | 'failureWindowMs'>;
  subjects: VerdictSubjects;
  sessions: SessionTable;
  audit: AuditLog;
  log: Logger;
  now: () => number;
  /** The exit catalog, assignments and bans (PIN_EXIT_RELAY); absent: nothing is banned. */
  exits?: ExitAssignments;
  /** Dials a destination through an instance (a proxy worker does); absent: refusals are scored as the SPEC says. */
  probeDestination?: (probe: DestinationProbe) => Promise<DestinationProbeResult | null>;
  /** A failure was found to be the destination's fault (metrics). */
  onDestinationFault?: () => void;
}

const noSuchSession = (): ExitpoolError => new ExitpoolError('EXITPOOL_NO_SUCH_SESSION', 'no such session');

/**
 * The one place that decides what evidence does (README.md here): a client's failure report,
 * a connection's outcome, a destination's check. It weighs them on the instance's health, and
 * when health leaves service on them, decides what the exit earned: a ban for everyone, a ban
 * for one site, or nothing. Nothing else bans an exit for its reputation.
 */
export class Verdicts {
  private readonly reportBudget: ReportBudget;
  private readonly floor: RoutableFloorGuard;
  private readonly pendingSuccesses = new PendingSuccesses();
  private readonly complaints = new SiteComplaints();
  /** The kind of each instance's latest scored failure: whether a quarantine it leads to burns the exit. */
  private readonly lastFailureKind = new Map<number, FailureKind>();
  /** A destination refusal is checked through another exit before it counts against this one. */
  private readonly blame: DestinationBlame | null;

  constructor(private readonly deps: VerdictsDeps) {
    this.reportBudget = new ReportBudget(deps.config.clientReportBudget, deps.now);
    this.floor = new RoutableFloorGuard(deps.config.minRoutable, deps.log);
    const probe = deps.probeDestination;
    this.blame = probe
      ? new DestinationBlame(async ({ host, port }, except) => {
          const socks = deps.subjects.probeRoute(except);
          return socks === null ? null : probe({ socks, host, port });
        }, deps.now)
      : null;
  }

  /**
   * A client's report about a request through `key`. Scored only within the reporter's budget
   * (CLIENT_REPORT_BUDGET), and never quarantines below the routable floor (MIN_ROUTABLE).
   */
  reportFailure(key: string, kind: FailureKind, reason: string, reporter: Reporter, domain = ''): FailureResult {
    const { sessions, subjects, audit } = this.deps;
    const s = sessions.get(key);
    if (!s) throw noSuchSession();
    // The report is charged to the instance the session is on now; a quarantine it causes moves
    // the session at once, so read the instance first or the echo and the audit name the new one.
    const instance = s.instance;
    const e = subjects.judged(instance);
    const now = this.deps.now();
    s.failures += 1;
    this.pendingSuccesses.reported(instance, key, now);
    const scored = this.reportBudget.take(reporter);
    audit.record({
      type: 'instance',
      instance,
      session: key,
      message: `failure reported on instance ${instance}: ${kind}${reason ? ` (${reason})` : ''}${scored ? '' : ' (not scored: over CLIENT_REPORT_BUDGET)'}`,
      details: { kind, reason, scored, reporter: reporterKey(reporter), ...(domain !== '' ? { domain } : {}) },
    });
    if (domain !== '') s.domains = [...s.domains.filter((d) => d !== domain), domain].slice(-MAX_SESSION_DOMAINS);
    sessions.markChanged(key);
    if (e && scored) {
      this.lastFailureKind.set(instance, kind);
      if (kind === 'captcha' || kind === 'blocked') this.complaints.add(instance, { domain, at: now });
    }
    const siteComplaint = domain !== '' && (kind === 'captcha' || kind === 'blocked');
    if (e && scored && siteComplaint && this.onlySiteComplaining(instance, domain, now) && e.health.wouldQuarantine(kind, 'client', scored, now)) {
      // Every complaint named this one site: the exit is burnt for it, not for everyone. Its
      // sessions that use the site leave; the instance stays in service for the others.
      e.health.failure(kind, 'client', scored, now, { mayQuarantine: false });
      this.burntForSite(e, kind as 'captcha' | 'blocked', domain);
    } else if (e) e.health.failure(kind, 'client', scored, now, { mayQuarantine: this.clientEvidenceMayQuarantine(instance) });
    return { session: key, instance, kind, scored };
  }

  /** A connection that worked: a session's success waits SUCCESS_REPORT_GRACE_MS for a report about it. */
  connectionSucceeded(r: CloseRecord, now: number): void {
    if (r.key !== null) this.pendingSuccesses.hold(r.instance, r.key, Math.min(now, r.endedAt));
    else this.deps.subjects.judged(r.instance)?.health.success(now, r.endedAt);
  }

  /**
   * A failed connection's weight on its instance. A refusal tor made about the destination is
   * first checked through another exit (DestinationBlame): if it fails the same way there, it
   * is the destination's fault and counts as a failed request only.
   */
  connectionFailed(r: CloseRecord): void {
    const failure = r.failure;
    const apply = (scored: boolean): void => {
      const e = this.deps.subjects.judged(r.instance);
      if (!e) return;
      if (scored) this.lastFailureKind.set(r.instance, 'transport');
      const mayQuarantine = !dependsOnClient(failure) || this.clientEvidenceMayQuarantine(r.instance);
      e.health.failure('transport', 'transport', scored, this.deps.now(), { occurredAt: r.endedAt, mayQuarantine });
    };
    const blame = this.blame;
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
   * Health moved an instance to quarantine on its own (scoring): its sessions move at once, and
   * an exit burnt by captchas, blocks or a run of transport failures is banned for EXIT_BAN_TTL.
   */
  quarantined(id: number, cause: Exclude<QuarantineCause, 'manual'>): void {
    const e = this.deps.subjects.judged(id);
    if (!e) return;
    const kind = this.lastFailureKind.get(id);
    const exits = this.deps.exits;
    const fingerprint = exitFingerprintOf(e, exits);
    if (exits && (kind === 'captcha' || kind === 'blocked' || kind === 'transport') && fingerprint !== '') {
      const domain = kind === 'transport' ? '' : this.complaints.soleDomain(id, this.deps.now() - this.deps.config.failureWindowMs);
      exits.banAssigned(id, kind, `instance ${id} quarantined (${cause}) after ${kind} failures${domain ? ` on ${domain}` : ''}`, fingerprint, domain);
    }
    this.complaints.clear(id);
    this.deps.subjects.moveSessionsOff(id, { reason: 'quarantine' });
  }

  /** The operator released the instance: its complaints are forgiven. */
  released(id: number): void {
    this.complaints.clear(id);
  }

  /** The instance left the pool. */
  forgetInstance(id: number): void {
    this.pendingSuccesses.forgetInstance(id);
    this.complaints.clear(id);
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

  /** Whether evidence the client controls may take instance `id` out of service (MIN_ROUTABLE). */
  private clientEvidenceMayQuarantine(id: number): boolean {
    const { subjects } = this.deps;
    if (!subjects.routableId(id)) return true;
    return this.floor.allows(subjects.routableCount(), subjects.poolSize(), id);
  }

  private onlySiteComplaining(id: number, domain: string, now: number): boolean {
    return this.complaints.soleDomain(id, now - this.deps.config.failureWindowMs) === domain;
  }

  /**
   * Captcha or blocked reports that would have quarantined the instance all named one site: the
   * exit is banned for that site (EXIT_BAN_TTL), the sessions that reported it move to exits not
   * banned for it, and the window's failures are settled, so the exit keeps serving the rest.
   */
  private burntForSite(e: JudgedInstance, kind: 'captcha' | 'blocked', domain: string): void {
    const id = e.instance.id;
    const exits = this.deps.exits;
    const fingerprint = exitFingerprintOf(e, exits);
    if (exits && fingerprint !== '') exits.banAssigned(id, kind, `instance ${id}: ${kind} reports on ${domain} alone`, fingerprint, domain);
    this.complaints.clear(id);
    e.health.settleWindow(this.deps.now());
    this.deps.subjects.moveSessionsOff(id, { reason: 'site_ban', domain });
  }
}

/** The relay an instance leaves through: the one traffic confirmed, else its assignment. */
function exitFingerprintOf(e: JudgedInstance, exits: ExitAssignments | undefined): string {
  return e.instance.exit().exitFingerprint || exits?.current(e.instance.id) || '';
}
