import { MAX_ADDRESSES_PER_EXIT } from './exit-list.js';

/** Why an exit is banned. */
export type BanCause = 'captcha' | 'blocked' | 'transport' | 'unreachable';

export interface ExitBan {
  readonly fingerprint: string;
  /** The address its traffic left from when it was banned (measured, listed, or published). */
  readonly address: string;
  /**
   * Every other address its traffic was seen leaving from (probes, the exit list): banned too.
   * Absent in bans made before addresses were measured.
   */
  readonly seen?: readonly string[];
  readonly nickname: string;
  /** '' bans the exit for everyone; a host name bans it for that site only. */
  readonly domain: string;
  readonly cause: BanCause;
  readonly reason: string;
  readonly since: number;
  readonly until: number;
}

/**
 * Exits no instance may be assigned until their ban ends, and exits banned for one site only.
 * A ban holds the relay's fingerprint, the address its traffic leaves from and every other
 * address it was seen leaving from: a relay that comes back under a new identity on one of them is
 * still the burnt IP. Bounded: one entry per banned relay and
 * site, dropped when it expires.
 */
export class ExitBans {
  private readonly bans = new Map<string, ExitBan>();
  private bansMade = 0;

  /** Bans (or extends the ban of) a relay, for everyone (`domain` '') or for one site; returns the ban now in force. */
  ban(relay: { fingerprint: string; address: string; nickname: string; seen?: readonly string[] }, cause: BanCause, reason: string, now: number, ttlMs: number, domain = ''): ExitBan {
    const key = `${relay.fingerprint}|${domain}`;
    const previous = this.bans.get(key);
    const until = Math.max(previous?.until ?? 0, now + ttlMs);
    const seen = [...new Set([...(previous?.seen ?? []), ...(previous && previous.address !== relay.address ? [previous.address] : []), ...(relay.seen ?? [])])].filter((a) => a !== relay.address).slice(-MAX_ADDRESSES_PER_EXIT);
    const ban: ExitBan = { fingerprint: relay.fingerprint, address: relay.address, nickname: relay.nickname, ...(seen.length > 0 ? { seen } : {}), domain, cause, reason, since: previous?.since ?? now, until };
    this.bans.set(key, ban);
    this.bansMade += 1;
    return ban;
  }

  /** Bans made (or extended) by ban() since start: not those restored or applied from the fleet (pool_exit_bans_total). */
  get made(): number {
    return this.bansMade;
  }

  /** Puts back a ban read from the durable state; one that has ended meanwhile is dropped. */
  restore(ban: ExitBan, now: number): void {
    if (ban.until <= now) return;
    const key = `${ban.fingerprint}|${ban.domain}`;
    const previous = this.bans.get(key);
    if (!previous || previous.until < ban.until) this.bans.set(key, ban);
  }

  /** Lifts every ban of the relay (for everyone and per site); false when it had none. */
  lift(fingerprint: string): boolean {
    let lifted = false;
    for (const [key, ban] of this.bans) {
      if (ban.fingerprint !== fingerprint) continue;
      this.bans.delete(key);
      lifted = true;
    }
    return lifted;
  }

  /** Banned for everyone, or for one of `domains` (a session's sites). */
  isBanned(relay: { fingerprint: string; address: string }, now: number, domains: readonly string[] = []): boolean {
    for (const ban of this.bans.values()) {
      if (ban.until <= now) continue;
      if (ban.domain !== '' && !domains.includes(ban.domain)) continue;
      if (ban.fingerprint === relay.fingerprint || ban.address === relay.address || ban.seen?.includes(relay.address)) return true;
    }
    return false;
  }

  /** Bans in force, soonest to end first; expired ones are dropped. */
  list(now: number): ExitBan[] {
    this.expire(now);
    return [...this.bans.values()].sort((a, b) => a.until - b.until);
  }

  expire(now: number): void {
    for (const [key, ban] of this.bans) if (ban.until <= now) this.bans.delete(key);
  }

  get size(): number {
    return this.bans.size;
  }
}
