import type { SessionRotateResult } from '../../shared/api/views.js';
import { ExitpoolError } from '../../shared/errors/catalogue.js';
import type { Session } from '../sessions/session.js';
import type { SessionTable, Placement } from '../sessions/session-table.js';
import { isFreshExit, rankByFreshness, rememberExit, type BannedFor } from './exit-freshness.js';
import type { PoolDeps } from './pool.js';
import type { PoolEntry } from './pool-entry.js';
import type { PoolInstance, RotationPlan } from './pool-instance.js';
import { exitFieldsOf } from './pool-views.js';

/**
 * A session rotation that finds no ready instance on a fresh exit assigns one to an idle
 * instance and waits this long for it (usually well under a second) before settling for less.
 */
export const FRESH_EXIT_WAIT_MS = 15_000;

/** What a session rotation needs of the pool. */
export interface SessionRotationHost {
  sessions(): SessionTable;
  deps(): PoolDeps;
  entry(id: number): PoolEntry | undefined;
  routable(): readonly number[];
  isRoutable(e: PoolEntry): boolean;
  /** A new exit for the instance, avoiding `avoid` and exits banned for `domains`, within `countries`, on behalf of `session`. */
  rotateInstance(e: PoolEntry, avoid: readonly string[] | undefined, session: string, domains?: readonly string[], countries?: readonly string[]): Promise<RotationPlan>;
  /** Whether an instance can serve a session's choices (its countries). */
  fits(s: Session, id: number): boolean;
  waitRotationEnd(i: PoolInstance, timeoutMs: number): Promise<void>;
}

const noSuchSession = (): ExitpoolError => new ExitpoolError('EXITPOOL_NO_SUCH_SESSION', 'no such session');

/**
 * Where a rotated session goes (supervisor/exits/README.md, "Rotations give a new IP"): an
 * instance whose exit is none of the session's recent exits (nor in their /24s, nor banned for a
 * site it reported); else an idle instance given a fresh exit; else, said out loud, whatever is
 * left. Also where a quarantine sends sessions, and the history each move leaves behind.
 */
export class SessionRotation {
  constructor(private readonly host: SessionRotationHost) {}

  async rotate(key: string, newnym: boolean): Promise<SessionRotateResult> {
    const sessions = this.host.sessions();
    const { config, audit, log, exits } = this.host.deps();
    const s = sessions.get(key);
    if (!s) throw noSuchSession();
    const vacated = s.instance;
    const leavingIp = this.exitIpOf(vacated);
    const avoid = [...s.recentExits, leavingIp].filter((ip) => ip !== '');
    const domains = [...s.domains];
    // Rotation keeps the countries the session asked for.
    const countries = s.params?.countries?.length ? s.params.countries : undefined;
    let targets = this.targets(vacated, avoid, domains, s);
    if (!targets.fresh && exits) {
      const idle = await this.freshExitOnIdleInstance(key, vacated, avoid, domains, countries);
      if (idle !== null) targets = { placement: { routable: [idle], lastResort: null }, fresh: true };
    }
    // The session may have been deleted or moved while a fresh exit was being assigned.
    if (sessions.get(key) !== s) throw noSuchSession();
    let note = '';
    const moved = sessions.rotate(key, targets.placement);
    if (moved) {
      this.noteLeftExit(key, leavingIp);
      if (!targets.fresh) note = `no instance on an exit outside the session's last ${config.exitHistory} exits: moved to one that may repeat an exit`;
      audit.record({
        type: 'rotate',
        session: key,
        instance: moved.to,
        message: `session rotated from instance ${moved.from} to ${moved.to}${note ? ` (${note})` : ''}`,
        details: { from: moved.from, to: moved.to, newnym, new_exit: targets.fresh },
      });
      const old = this.host.entry(vacated);
      if (newnym && old?.instance.ready()) {
        this.host.rotateInstance(old, undefined, key).catch((err: unknown) => log.warn('newnym after session rotate failed', { instance: vacated, error: (err as Error).message }));
      }
    } else {
      // Nowhere else to go: the session stays and its instance gets a new exit (or circuit) instead.
      const e = this.host.entry(s.instance);
      if (!e || !e.instance.ready()) throw new ExitpoolError('EXITPOOL_NO_ROUTABLE_INSTANCE', 'no routable instance to rotate to');
      const plan = await this.host.rotateInstance(e, avoid, key, domains, countries);
      this.noteLeftExit(key, leavingIp);
      if (exits && plan.exit === '') note = plan.shortage || 'no exit could be assigned: a new circuit within the same selection';
      // A new pin takes well under a second: answer once it serves, so the session's next
      // request is not moved off its rotating instance onto an exit it just left.
      // A session asking for countries keeps its exit when there is no other there (re-pinned at
      // once): answering before that would find the instance mid-rotation and place it elsewhere.
      if (plan.exit !== '' || countries !== undefined) await this.host.waitRotationEnd(e.instance, FRESH_EXIT_WAIT_MS);
    }
    const e = this.host.entry(s.instance) as PoolEntry;
    const { exit_ip, exit_confirmed } = exitFieldsOf(e.instance.exit());
    return { session: key, instance: s.instance, exit_ip, exit_confirmed, new_exit: note === '', exit_note: note };
  }

  /**
   * Other routable instances for a session leaving `from`, freshest exits first (rankByFreshness);
   * for one session (`s`), only those that fit its choices. The placement keeps the pool's fit
   * check, so each session a quarantine moves lands where its countries allow.
   */
  targets(from: number, avoid: readonly string[], domains: readonly string[] = [], s?: Session): { placement: Placement; fresh: boolean } {
    const others = this.host
      .routable()
      .filter((id) => id !== from && (s === undefined || this.host.fits(s, id)))
      .map((id) => ({ id, exit: (this.host.entry(id) as PoolEntry).instance.exit() }));
    const ranked = rankByFreshness(others, { addresses: avoid, domains }, this.bannedFor);
    return { placement: { routable: ranked.ids, lastResort: null, fits: (x, id) => this.host.fits(x, id) }, fresh: ranked.fresh };
  }

  /** Remembers the exit a session was moved away from (EXIT_HISTORY of them, newest last). */
  noteLeftExit(key: string, ip: string): void {
    const sessions = this.host.sessions();
    const s = sessions.get(key);
    if (!s) return;
    s.recentExits = rememberExit(s.recentExits, ip, this.host.deps().config.exitHistory);
    sessions.markChanged(key);
  }

  private exitIpOf(id: number): string {
    return this.host.entry(id)?.instance.exit().exitIp ?? '';
  }

  private readonly bannedFor: BannedFor = (exit, domains) => this.host.deps().exits?.bannedFor(exit, domains) ?? false;

  /**
   * Assigns an idle routable instance (no sessions) a fresh exit avoiding `avoid`, and waits
   * (FRESH_EXIT_WAIT_MS at most) until it serves through it. Returns its id, or null.
   */
  private async freshExitOnIdleInstance(key: string, from: number, avoid: readonly string[], domains: readonly string[], countries?: readonly string[]): Promise<number | null> {
    const sessions = this.host.sessions();
    const idle = this.host
      .routable()
      .filter((id) => id !== from && sessions.countOn(id) === 0)
      .map((id) => this.host.entry(id) as PoolEntry);
    const e = idle[Math.floor(Math.random() * idle.length)];
    if (!e) return null;
    const plan = await this.host.rotateInstance(e, avoid, key, domains, countries);
    if (plan.exit === '') return null;
    await this.host.waitRotationEnd(e.instance, FRESH_EXIT_WAIT_MS);
    const fresh = isFreshExit(e.instance.exit(), { addresses: avoid, domains }, this.bannedFor);
    return this.host.isRoutable(e) && fresh ? e.instance.id : null;
  }
}
