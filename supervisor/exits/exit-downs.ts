import type { ExitDownView } from '../../shared/api/views.js';

/**
 * Exits found dead by the pool's own evidence (supervisor/tor/exit-liveness.ts): a short state of
 * their own, distinct from the hours-long bans (README.md, "Exits that die"). A down exit is
 * assigned to no instance for its hold; then it is eligible again, on probation: dying again
 * before the probation ends doubles the next hold.
 */

/** How long a relay found dead is assigned to no instance, the first time. */
export const EXIT_DOWN_HOLD_MS = 10 * 60_000;
/**
 * The longest hold, however often it dies again: by then the directory authorities have noticed
 * a relay that stays down (they vote it out of Running within about an hour) and it leaves the
 * catalog by itself.
 */
export const EXIT_DOWN_HOLD_MAX_MS = 2 * 60 * 60_000;
/** After its hold, a relay is eligible again; found dead again within this long, its next hold doubles. */
export const EXIT_DOWN_PROBATION_MS = 30 * 60_000;

export interface ExitDownTimes {
  holdMs: number;
  holdMaxMs: number;
  probationMs: number;
}

export const EXIT_DOWN_TIMES: ExitDownTimes = Object.freeze({ holdMs: EXIT_DOWN_HOLD_MS, holdMaxMs: EXIT_DOWN_HOLD_MAX_MS, probationMs: EXIT_DOWN_PROBATION_MS });

export interface ExitDown {
  readonly fingerprint: string;
  readonly address: string;
  readonly nickname: string;
  /** When it was last found dead. */
  readonly since: number;
  /** Assigned to no instance until then. */
  readonly until: number;
  /** Eligible again from `until`; found dead again before this, its next hold doubles. */
  readonly probationUntil: number;
  /** Deaths in a row, each found before the previous one's probation ended. */
  readonly strikes: number;
  /** The instance whose tor found it (null when unknown). */
  readonly instance: number | null;
  /** What that tor saw, one line per piece of evidence. */
  readonly evidence: readonly string[];
}

export type ExitDownState = 'down' | 'probation';

/** Bounded: one entry per relay, dropped when its probation ends. */
export class ExitDowns {
  private readonly downs = new Map<string, ExitDown>();
  private deaths = 0;

  constructor(private readonly times: ExitDownTimes = EXIT_DOWN_TIMES) {}

  /**
   * Records that `relay` was found dead. Returns the entry in force and whether this is a new
   * death (false while it is still down: another instance found what was already known).
   */
  markDown(
    relay: { fingerprint: string; address: string; nickname: string },
    instance: number | null,
    evidence: readonly string[],
    now: number,
  ): { down: ExitDown; fresh: boolean } {
    const previous = this.current(relay.fingerprint, now);
    if (previous && previous.until > now) return { down: previous, fresh: false };
    const strikes = previous ? previous.strikes + 1 : 1;
    const hold = Math.min(this.times.holdMs * 2 ** (strikes - 1), this.times.holdMaxMs);
    const down: ExitDown = { ...relay, since: now, until: now + hold, probationUntil: now + hold + this.times.probationMs, strikes, instance, evidence: [...evidence] };
    this.downs.set(relay.fingerprint, down);
    this.deaths++;
    return { down, fresh: true };
  }

  /** Deaths found since the start (a relay dead again within its probation counts again): pool_exit_deaths_total. */
  get found(): number {
    return this.deaths;
  }

  /** How many relays are down and on probation now. */
  counts(now: number): { down: number; probation: number } {
    let down = 0;
    for (const d of this.list(now)) if (d.until > now) down++;
    return { down, probation: this.downs.size - down };
  }

  /** `down` (assigned to no instance), `probation` (eligible, watched), or undefined. */
  stateOf(fingerprint: string, now: number): ExitDownState | undefined {
    const d = this.current(fingerprint, now);
    if (!d) return undefined;
    return d.until > now ? 'down' : 'probation';
  }

  isDown(fingerprint: string, now: number): boolean {
    return this.stateOf(fingerprint, now) === 'down';
  }

  /** The entry of a relay down or on probation. */
  get(fingerprint: string, now: number): ExitDown | undefined {
    return this.current(fingerprint, now);
  }

  /** Relays down or on probation, soonest eligible first; those past their probation are dropped. */
  list(now: number): ExitDown[] {
    for (const [fp, d] of this.downs) if (d.probationUntil <= now) this.downs.delete(fp);
    return [...this.downs.values()].sort((a, b) => a.until - b.until);
  }

  private current(fingerprint: string, now: number): ExitDown | undefined {
    const d = this.downs.get(fingerprint);
    if (!d) return undefined;
    if (d.probationUntil > now) return d;
    this.downs.delete(fingerprint);
    return undefined;
  }
}

/** The API's view of an entry (GET /api/exits, an instance's assigned exit). */
export function exitDownViewOf(d: ExitDown, now: number): ExitDownView {
  return {
    fingerprint: d.fingerprint,
    nickname: d.nickname,
    address: d.address,
    state: d.until > now ? 'down' : 'probation',
    since: new Date(d.since).toISOString(),
    until: new Date(d.until).toISOString(),
    probation_until: new Date(d.probationUntil).toISOString(),
    strikes: d.strikes,
    instance: d.instance,
    evidence: [...d.evidence],
  };
}
