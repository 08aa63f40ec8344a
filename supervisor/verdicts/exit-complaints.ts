/** Complaints an exit keeps (the newest); each is small, and there is one list per complained-of exit. */
export const MAX_COMPLAINTS_PER_EXIT = 64;
/** Exits with complaints remembered at once; beyond it the one complained of least recently is forgotten. */
export const MAX_EXITS_WITH_COMPLAINTS = 4_096;

/** A scored captcha or blocked report against an exit. */
export interface Complaint {
  /** Who stands behind it (parties.ts): complaints of one party are one word. */
  party: string;
  credential: string;
  kind: 'captcha' | 'blocked';
  weight: number;
  /** The site it named, when the session reached that site through this exit; '' otherwise. */
  domain: string;
  at: number;
}

/**
 * Captcha and blocked reports per exit (by relay fingerprint, else address), from every instance
 * that left through it: what a ban needs to be earned. For one site, enough weight from reports
 * naming it (siteWeight); for everyone, independent parties (parties). Bounded per exit and in
 * exits.
 */
export class ExitComplaints {
  /** Insertion order is recency of the exit's last complaint (re-inserted on every add). */
  private readonly byExit = new Map<string, Complaint[]>();

  add(exit: string, complaint: Complaint): void {
    const list = this.byExit.get(exit) ?? [];
    this.byExit.delete(exit);
    list.push(complaint);
    if (list.length > MAX_COMPLAINTS_PER_EXIT) list.splice(0, list.length - MAX_COMPLAINTS_PER_EXIT);
    this.byExit.set(exit, list);
    if (this.byExit.size > MAX_EXITS_WITH_COMPLAINTS) {
      const oldest = this.byExit.keys().next().value;
      if (oldest !== undefined) this.byExit.delete(oldest);
    }
  }

  /** The weight of the complaints naming `domain` since `since`. */
  siteWeight(exit: string, domain: string, since: number): number {
    return this.recent(exit, since)
      .filter((c) => c.domain === domain)
      .reduce((sum, c) => sum + c.weight, 0);
  }

  /** The complaints since `since`. */
  recent(exit: string, since: number): Complaint[] {
    return (this.byExit.get(exit) ?? []).filter((c) => c.at >= since);
  }

  /** Parties that complained since `since`. */
  parties(exit: string, since: number): Set<string> {
    return new Set(this.recent(exit, since).map((c) => c.party));
  }

  /** The complaints naming `domain` were answered (a ban for that site): the others stay. */
  settleSite(exit: string, domain: string): void {
    const list = this.byExit.get(exit);
    if (!list) return;
    const kept = list.filter((c) => c.domain !== domain);
    if (kept.length === 0) this.byExit.delete(exit);
    else this.byExit.set(exit, kept);
  }

  /** Every complaint was answered (a ban for everyone, an operator's release). */
  clear(exit: string): void {
    this.byExit.delete(exit);
  }
}
