/** Hosts remembered per session (the newest; an older one reached again moves to the end). */
export const MAX_VISITS_PER_SESSION = 16;
/** Sessions whose visits are remembered at once; beyond it the least recently active is forgotten. */
export const MAX_SESSIONS_WITH_VISITS = 100_000;

interface Visit {
  host: string;
  /** The exit the connection left through (its relay's fingerprint, else its address). */
  exit: string;
  credential: string;
  at: number;
}

/** Whether `host` (a name the client reached) is `domain` or one of its subdomains; IP literals match only themselves. */
export function hostIsSite(host: string, domain: string): boolean {
  const h = host.toLowerCase();
  const d = domain.toLowerCase();
  return h === d || h.endsWith(`.${d}`);
}

/**
 * Which hosts each session reached, through which exit, with which credential, recently: what
 * makes a report about a site credible (the session reached the site through the exit it
 * blames), and which sessions a credential used on an exit (a report moves them all). Fed by the
 * connections as they start (ReachedHost, before a client can report what it saw) and as they
 * end (close records); bounded per session and in sessions (least recently active first
 * out); entries older than the caller's window are ignored and dropped when the session is next
 * written.
 */
export class VisitLog {
  /** Insertion order is recency of the session's last write (re-inserted on every write). */
  private readonly bySession = new Map<string, Visit[]>();
  /** Sessions with a visit through each exit. */
  private readonly byExit = new Map<string, Set<string>>();

  record(key: string, visit: Visit): void {
    const visits = this.bySession.get(key) ?? [];
    this.bySession.delete(key);
    const i = visits.findIndex((v) => v.host === visit.host && v.exit === visit.exit && v.credential === visit.credential);
    if (i >= 0) visits.splice(i, 1);
    visits.push(visit);
    const trimmed = visits.length > MAX_VISITS_PER_SESSION ? visits.splice(0, visits.length - MAX_VISITS_PER_SESSION) : [];
    for (const old of trimmed) if (!visits.some((v) => v.exit === old.exit)) this.unindex(old.exit, key);
    this.bySession.set(key, visits);
    let onExit = this.byExit.get(visit.exit);
    if (!onExit) this.byExit.set(visit.exit, (onExit = new Set()));
    onExit.add(key);
    if (this.bySession.size > MAX_SESSIONS_WITH_VISITS) {
      const oldest = this.bySession.keys().next().value;
      if (oldest !== undefined) this.forget(oldest);
    }
  }

  /** Whether session `key` reached `domain` (or a subdomain) through `exit` since `since`. */
  visited(key: string, exit: string, domain: string, since: number): boolean {
    return (this.bySession.get(key) ?? []).some((v) => v.at >= since && v.exit === exit && hostIsSite(v.host, domain));
  }

  /** Sessions that used `credential` through `exit` since `since`. */
  sessionsUsing(credential: string, exit: string, since: number): string[] {
    return this.onExit(exit, (v) => v.at >= since && v.exit === exit && v.credential === credential);
  }

  /** Sessions that reached `domain` through `exit` since `since`. */
  sessionsVisiting(exit: string, domain: string, since: number): string[] {
    return this.onExit(exit, (v) => v.at >= since && v.exit === exit && hostIsSite(v.host, domain));
  }

  forget(key: string): void {
    const visits = this.bySession.get(key);
    if (!visits) return;
    this.bySession.delete(key);
    for (const v of visits) this.unindex(v.exit, key);
  }

  private unindex(exit: string, key: string): void {
    const onExit = this.byExit.get(exit);
    onExit?.delete(key);
    if (onExit?.size === 0) this.byExit.delete(exit);
  }

  get size(): number {
    return this.bySession.size;
  }

  private onExit(exit: string, matches: (v: Visit) => boolean): string[] {
    const keys: string[] = [];
    for (const key of this.byExit.get(exit) ?? []) if ((this.bySession.get(key) ?? []).some(matches)) keys.push(key);
    return keys;
  }
}
