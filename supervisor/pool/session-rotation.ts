import type { SessionRotateResult } from '../../shared/api/views.js';
import type { Config } from '../../shared/config/index.js';
import { ExitpoolError } from '../../shared/errors/catalogue.js';
import { errorMessage } from '../../shared/errors/error-message.js';
import type { Logger } from '../../shared/logger.js';
import type { AuditLog } from '../audit/audit-log.js';
import { isFreshExit } from './exit-freshness.js';
import type { InstanceLifecycle, InstanceRotation } from './instance-lifecycle.js';
import type { InstanceRegistry } from './instance-registry.js';
import type { PoolEntry } from './pool-entry.js';
import { exitFieldsOf } from './pool-views.js';

/**
 * A session rotation that finds no ready instance on a fresh exit assigns one to an idle
 * instance and waits this long for it (usually well under a second) before settling for less.
 */
export const FRESH_EXIT_WAIT_MS = 15_000;

export interface SessionRotationDeps {
  registry: InstanceRegistry;
  lifecycle: InstanceLifecycle;
  config: Pick<Config, 'exitHistory'>;
  audit: AuditLog;
  log: Logger;
}

const noSuchSession = (): ExitpoolError => new ExitpoolError('EXITPOOL_NO_SUCH_SESSION', 'no such session');

/**
 * Where a rotated session goes (supervisor/exits/README.md, "Rotations give a new IP"): an
 * instance whose exit is none of the session's recent exits (nor in their /24s, nor banned for a
 * site it reported); else an idle instance given a fresh exit; else, said out loud, whatever is
 * left. Where a quarantine sends sessions, and the history each move leaves behind, is the
 * registry's (InstanceRegistry.targets, noteLeftExit).
 */
export class SessionRotation {
  constructor(private readonly deps: SessionRotationDeps) {}

  /** POST /api/sessions/{key}/rotate: a new exit for the session, its instance rotated when it has nowhere else to go. */
  async rotate(key: string, newnym: boolean): Promise<SessionRotateResult> {
    const outcome = await this.move(key, { newnym, inPlace: true, reason: 'rotate' });
    return outcome.result;
  }

  /**
   * A client's report moves its own session to a fresh exit, as a rotation would, but never
   * rotates its instance in place: that would change the exit of every other session on it.
   * With nowhere to go the session stays, and the answer says so.
   */
  async moveReported(key: string): Promise<{ moved: boolean; result: SessionRotateResult }> {
    return this.move(key, { newnym: false, inPlace: false, reason: 'report' });
  }

  /**
   * Moves another session the reporting credential sent through the reported exit: to the
   * freshest routable instance there is now, without waiting for an idle one to be given an exit.
   */
  moveAlong(key: string): boolean {
    const { registry, audit } = this.deps;
    const s = registry.sessions.get(key);
    if (!s) return false;
    const vacated = s.instance;
    const leavingIp = registry.exitIpOf(vacated);
    const targets = registry.targets(vacated, [...s.recentExits, leavingIp].filter((ip) => ip !== ''), [...s.domains], s);
    const moved = registry.sessions.rotate(key, targets.placement, 'report');
    if (!moved) return false;
    registry.noteLeftExit(key, leavingIp);
    audit.record({
      type: 'assignment',
      session: key,
      instance: moved.to,
      message: `session moved from instance ${moved.from} to ${moved.to}: its credential reported a failure through that exit`,
      details: { from: moved.from, to: moved.to, new_exit: targets.fresh, reason: 'report' },
    });
    return true;
  }

  private async move(key: string, how: { newnym: boolean; inPlace: boolean; reason: 'rotate' | 'report' }): Promise<{ moved: boolean; result: SessionRotateResult }> {
    const { registry, lifecycle, config, audit, log } = this.deps;
    const { sessions, exits } = registry;
    const { newnym } = how;
    const s = sessions.get(key);
    if (!s) throw noSuchSession();
    const vacated = s.instance;
    const leavingIp = registry.exitIpOf(vacated);
    const avoid = [...s.recentExits, leavingIp].filter((ip) => ip !== '');
    const domains = [...s.domains];
    // Rotation keeps the countries the session asked for.
    const countries = s.params?.countries?.length ? s.params.countries : undefined;
    let targets = registry.targets(vacated, avoid, domains, s);
    if (!targets.fresh && exits) {
      const idle = await this.freshExitOnIdleInstance(key, vacated, avoid, domains, countries);
      if (idle !== null) targets = { placement: { routable: [idle], lastResort: null }, fresh: true };
    }
    // The session may have been deleted or moved while a fresh exit was being assigned.
    if (sessions.get(key) !== s) throw noSuchSession();
    let note = '';
    const moved = sessions.rotate(key, targets.placement, how.reason);
    if (moved) {
      registry.noteLeftExit(key, leavingIp);
      if (!targets.fresh) note = `no instance on an exit outside the session's last ${config.exitHistory} exits: moved to one that may repeat an exit`;
      const what = how.reason === 'report' ? 'moved after its failure report' : 'rotated';
      audit.record({
        type: how.reason === 'report' ? 'assignment' : 'rotate',
        session: key,
        instance: moved.to,
        message: `session ${what} from instance ${moved.from} to ${moved.to}${note ? ` (${note})` : ''}`,
        details: { from: moved.from, to: moved.to, newnym, new_exit: targets.fresh, reason: how.reason },
      });
      const old = registry.entry(vacated);
      if (newnym && old?.instance.ready()) {
        lifecycle.rotateInstance(old, 'session', { session: key }).catch((err: unknown) => log.warn('newnym after session rotate failed', { instance: vacated, error: errorMessage(err) }));
      }
    } else if (!how.inPlace) {
      note = 'no other instance can take the session: it stays on its exit (a rotation would give its instance a new exit, moving every session on it)';
    } else {
      // Nowhere else to go: the session stays and its instance gets a new exit (or circuit) instead.
      const e = registry.entry(s.instance);
      if (!e || !e.instance.ready()) throw new ExitpoolError('EXITPOOL_NO_ROUTABLE_INSTANCE', 'no routable instance to rotate to');
      const plan = await lifecycle.rotateInstance(e, 'session', rotationOf(key, avoid, domains, countries));
      registry.noteLeftExit(key, leavingIp);
      if (exits && plan.exit === '') note = plan.shortage || 'no exit could be assigned: a new circuit within the same selection';
      // A new pin takes well under a second: answer once it serves, so the session's next
      // request is not moved off its rotating instance onto an exit it just left.
      // A session asking for countries keeps its exit when there is no other there (re-pinned at
      // once): answering before that would find the instance mid-rotation and place it elsewhere.
      if (plan.exit !== '' || countries !== undefined) await lifecycle.waitRotationEnd(e.instance, FRESH_EXIT_WAIT_MS);
    }
    const e = registry.entry(s.instance) as PoolEntry;
    const { exit_ip, exit_confirmed } = exitFieldsOf(e.instance.exit());
    return { moved: moved !== null, result: { session: key, instance: s.instance, exit_ip, exit_confirmed, new_exit: note === '', exit_note: note } };
  }

  /**
   * Assigns an idle routable instance (no sessions) a fresh exit avoiding `avoid`, and waits
   * (FRESH_EXIT_WAIT_MS at most) until it serves through it. Returns its id, or null.
   */
  private async freshExitOnIdleInstance(key: string, from: number, avoid: readonly string[], domains: readonly string[], countries?: readonly string[]): Promise<number | null> {
    const { registry, lifecycle } = this.deps;
    const idle = registry
      .placement()
      .routable.filter((id) => id !== from && registry.sessions.countOn(id) === 0)
      .map((id) => registry.entry(id) as PoolEntry);
    const e = idle[Math.floor(Math.random() * idle.length)];
    if (!e) return null;
    const plan = await lifecycle.rotateInstance(e, 'session', rotationOf(key, avoid, domains, countries));
    if (plan.exit === '') return null;
    await lifecycle.waitRotationEnd(e.instance, FRESH_EXIT_WAIT_MS);
    const fresh = isFreshExit(e.instance.exit(), { addresses: avoid, domains }, registry.bannedFor);
    return registry.isRoutable(e) && fresh ? e.instance.id : null;
  }
}

/** The rotation a session's move asks of an instance: away from its recent exits and the sites it reported, within its countries. */
function rotationOf(session: string, avoid: readonly string[], domains: readonly string[], countries: readonly string[] | undefined): InstanceRotation {
  return { session, avoid, avoidDomains: domains, ...(countries ? { countries } : {}) };
}
