import type { AssignmentTable } from './assignment-table.js';
import type { ExitAnnouncer } from './exit-announcer.js';
import type { BanCause, ExitBan, ExitBans } from './exit-bans.js';
import type { ExitCatalog } from './exit-catalog.js';
import type { ExitRelay } from './exit-relay.js';

/** How long an exit through which no circuit could be built stays banned (`unreachable`). */
export const UNREACHABLE_EXIT_BAN_MS = 10 * 60_000;

export interface ExitSanctionsOptions {
  catalog: ExitCatalog;
  table: AssignmentTable;
  bans: ExitBans;
  /** EXIT_BAN_TTL: how long a ban on the verdicts' evidence lasts. */
  banTtlMs: number;
  now: () => number;
  /** The exits an instance could be assigned now but for bans for one of `domains` (ExitAssignments.eligible). */
  eligible(domains: readonly string[]): ExitRelay[];
  /** A ban was lifted: its exit may be the one a shared instance waits for (the spread off shared exits). */
  freed(): void;
  say: ExitAnnouncer;
}

/**
 * What the pool holds against exits (supervisor/verdicts/README.md): bans, for everyone or one
 * site, until a deadline (made here and shared by the fleet, or made on another node and applied
 * here), and suspects, exits one party complained of, chosen only when no other qualifies. A ban
 * for everyone moves every instance pinned to the exit; a lifted one frees it for the spread.
 */
export class ExitSanctions {
  /** Suspect exits, by fingerprint, until when. */
  private readonly suspects = new Map<string, number>();

  constructor(private readonly o: ExitSanctionsOptions) {}

  /** Instance `id`'s tor could build no circuit through `fingerprint`: banned for UNREACHABLE_EXIT_BAN_MS. */
  unreachable(id: number, fingerprint: string): void {
    const relay = this.o.catalog.get(fingerprint) ?? this.o.table.assigned.get(id)?.relay;
    if (!relay) return;
    this.banRelay(relay, 'unreachable', `no circuit could be built through it for instance ${id}`, UNREACHABLE_EXIT_BAN_MS, id);
  }

  /**
   * Bans the exit instance `id` was assigned (a quarantine for captcha, block or transport
   * failures): for everyone, or only for `domain` when every complaint named that one site.
   */
  banAssigned(id: number, cause: BanCause, reason: string, exitFingerprint: string, domain = ''): ExitBan | undefined {
    const relay = this.o.catalog.get(exitFingerprint) ?? this.o.table.assigned.get(id)?.relay;
    if (!relay) return undefined;
    const ban = this.banRelay(relay, cause, reason, this.o.banTtlMs, id, domain);
    // Banned for everyone: every instance still pinned to it needs another exit (a quarantined
    // one gets it from its remediation; the pool skips it).
    if (domain === '') {
      const ids = this.o.table.instancesOn(relay.fingerprint);
      if (ids.length > 0) this.o.say.exitGone(ids);
    }
    return ban;
  }

  /** Whether an exit (by fingerprint or address) is banned for everyone or for one of `domains`. */
  bannedFor(exit: { fingerprint: string; address: string }, domains: readonly string[]): boolean {
    return this.o.bans.isBanned(exit, this.o.now(), domains);
  }

  /**
   * An exit quarantined on the reports of one party: chosen last until `until` (a ban needs
   * independent reporters: supervisor/verdicts/README.md).
   */
  markSuspect(fingerprint: string, until: number): void {
    this.suspects.set(fingerprint, Math.max(until, this.suspects.get(fingerprint) ?? 0));
    const relay = this.o.catalog.get(fingerprint);
    this.o.say.audit(null, `exit ${relay?.nickname ?? fingerprint} is suspect until ${new Date(until).toISOString()}: quarantined on one party's reports; chosen only when no other exit qualifies`, {
      fingerprint,
      reason: 'suspect',
      until: new Date(until).toISOString(),
    });
  }

  isSuspect(fingerprint: string, now: number = this.o.now()): boolean {
    const until = this.suspects.get(fingerprint);
    if (until === undefined) return false;
    if (until > now) return true;
    this.suspects.delete(fingerprint);
    return false;
  }

  /**
   * What banning `fingerprint` (for everyone, or for `domain`) would leave eligible: in the whole
   * catalog and in its country (the floors of supervisor/verdicts/ban-guard.ts).
   */
  eligibleAfterBan(fingerprint: string, domain = ''): { catalog: number; eligible: number; country: string; eligibleInCountry: number } {
    const relay = this.o.catalog.get(fingerprint);
    const country = relay?.country ?? '';
    const left = this.o.eligible(domain === '' ? [] : [domain]).filter((e) => e.fingerprint !== fingerprint && (relay === undefined || (e.address !== relay.address && !relay.seen.includes(e.address))));
    return { catalog: this.o.catalog.size, eligible: left.length, country, eligibleInCountry: country === '' ? 0 : left.filter((e) => e.country === country).length };
  }

  /** Lifts a ban by hand; false when there was none. The fleet lifts it everywhere (`lifted`). */
  liftBan(fingerprint: string): boolean {
    const lifted = this.o.bans.lift(fingerprint);
    if (lifted) {
      this.o.say.audit(null, `ban of exit ${fingerprint} lifted`, { fingerprint });
      this.o.say.lifted(fingerprint);
      this.o.freed();
    }
    return lifted;
  }

  /** A ban another node of the fleet made: in force here too (a longer one already here stands). */
  applyFleetBan(ban: ExitBan): void {
    this.o.bans.restore(ban, this.o.now());
  }

  /** A ban lifted on another node of the fleet: lifted here too. */
  applyFleetLift(fingerprint: string): void {
    if (!this.o.bans.lift(fingerprint)) return;
    this.o.say.audit(null, `ban of exit ${fingerprint} lifted on another node`, { fingerprint, by: 'fleet' });
    this.o.freed();
  }

  /** A ban made here (the fleet shares it, `banned`); a suspect exit banned is no longer only suspect. */
  private banRelay(relay: ExitRelay, cause: BanCause, reason: string, ttlMs: number, id: number | null, domain = ''): ExitBan {
    const ban = this.o.bans.ban(relay, cause, reason, this.o.now(), ttlMs, domain);
    this.suspects.delete(relay.fingerprint);
    this.o.say.banned(ban);
    const scope = domain === '' ? '' : ` for ${domain}`;
    this.o.say.audit(id, `exit ${relay.nickname} (${relay.address}) banned${scope} until ${new Date(ban.until).toISOString()}: ${reason}`, {
      fingerprint: relay.fingerprint,
      address: relay.address,
      domain,
      cause,
      until: new Date(ban.until).toISOString(),
    });
    return ban;
  }
}
