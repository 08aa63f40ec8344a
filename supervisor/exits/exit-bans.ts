/** Why an exit is banned. */
export type BanCause = 'captcha' | 'blocked' | 'transport' | 'unreachable';

export interface ExitBan {
  readonly fingerprint: string;
  readonly address: string;
  readonly nickname: string;
  readonly cause: BanCause;
  readonly reason: string;
  readonly since: number;
  readonly until: number;
}

/**
 * Exits no instance may be assigned until their ban ends. A ban holds the relay's fingerprint
 * and its address: a relay that comes back under a new identity on the same address is still
 * the burnt IP. Bounded: one entry per banned relay, dropped when it expires.
 */
export class ExitBans {
  private readonly bans = new Map<string, ExitBan>();

  /** Bans (or extends the ban of) a relay; returns the ban now in force. */
  ban(relay: { fingerprint: string; address: string; nickname: string }, cause: BanCause, reason: string, now: number, ttlMs: number): ExitBan {
    const previous = this.bans.get(relay.fingerprint);
    const until = Math.max(previous?.until ?? 0, now + ttlMs);
    const ban: ExitBan = { ...relay, cause, reason, since: previous?.since ?? now, until };
    this.bans.set(relay.fingerprint, ban);
    return ban;
  }

  /** Lifts a ban by hand; false when the relay was not banned. */
  lift(fingerprint: string): boolean {
    return this.bans.delete(fingerprint);
  }

  isBanned(relay: { fingerprint: string; address: string }, now: number): boolean {
    for (const ban of this.bans.values()) {
      if (ban.until <= now) continue;
      if (ban.fingerprint === relay.fingerprint || ban.address === relay.address) return true;
    }
    return false;
  }

  /** Bans in force, soonest to end first; expired ones are dropped. */
  list(now: number): ExitBan[] {
    this.expire(now);
    return [...this.bans.values()].sort((a, b) => a.until - b.until);
  }

  expire(now: number): void {
    for (const [fp, ban] of this.bans) if (ban.until <= now) this.bans.delete(fp);
  }

  get size(): number {
    return this.bans.size;
  }
}
