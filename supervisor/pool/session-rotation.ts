import type { SessionRotateResult } from '../../shared/api/views.js';
import type { Config } from '../../shared/config/index.js';
import { ExitpoolError } from '../../shared/errors/catalogue.js';
import { errorMessage } from '../../shared/errors/error-message.js';
import type { Logger } from '../../shared/logger.js';
import type { AuditLog } from '../audit/audit-log.js';
import type { Placement } from '../sessions/session-table.js';
import type { InstanceLifecycle } from './instance-lifecycle.js';
import type { InstanceRegistry } from './instance-registry.js';
import type { ReportVerdict } from '../verdicts/verdicts.js';
import { isFreshExit } from './exit-freshness.js';
import type { PoolEntry } from './pool-entry.js';
import { exitFieldsOf } from './pool-views.js';
import { FRESH_EXIT_WAIT_MS, rotationFor, type ExitWish, type SpareSupply } from './spare-supply.js';

export interface SessionRotationDeps {
  registry: InstanceRegistry;
  lifecycle: InstanceLifecycle;
  supply: SpareSupply;
  config: Pick<Config, 'exitHistory'>;
  audit: AuditLog;
  log: Logger;
}

/**
 * Where a rotated session's new exit came from (the audit's `supply`): an instance already on a
 * fresh exit (`instance`), a warm spare (`spare`), a free spare or idle instance given one for it
 * (`spare_assigned`, `idle_assigned`), or none fresh (`none`).
 */
export type SupplyPath = 'instance' | 'spare' | 'spare_assigned' | 'idle_assigned' | 'none';

const noSuchSession = (): ExitpoolError => new ExitpoolError('EXITPOOL_NO_SUCH_SESSION', 'no such session');

/**
 * Where a rotated session goes (supervisor/exits/README.md, "Rotations give a new IP"; README.md
 * here, "Spares"): an instance whose exit is none of the session's recent exits (nor in their
 * /24s, nor banned for a site it reported), a warm spare only when no other is; else a free
 * instance (a spare, else an idle one) given a fresh exit (SpareSupply); else, said out loud,
 * whatever is left. The session always moves to another instance when there is one (the SPEC's
 * first rotate rule), even alone on its own, which could otherwise be re-pinned where it is. No
 * instance that carries another session is given a new exit for it, so no other session's exit
 * changes; the one exception is the SPEC's: with nowhere else to move at all, the session's own
 * instance is rotated. Where a quarantine sends sessions, and the history each move
 * leaves behind, is the registry's (InstanceRegistry.targets, noteLeftExit).
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
   * After the verdicts weighed a client's report about `key` (supervisor/verdicts): the session
   * leaves the reported exit at once, with the sessions its credential sent through that exit,
   * whatever the report's budget (it harms no one else). A quarantine or site ban the report
   * caused may have moved it already: then whether that move found a fresh exit is said.
   */
  async afterReport(key: string, v: ReportVerdict): Promise<{ moved: boolean; newExit: boolean; note: string }> {
    const { registry, config } = this.deps;
    const sessions = registry.sessions;
    let moved = false;
    let newExit = false;
    let note = '';
    const s = sessions.get(key);
    if (s && s.instance === v.instance) {
      const outcome = await this.moveReported(key).catch(() => null);
      moved = outcome?.moved ?? false;
      newExit = outcome?.result.new_exit ?? false;
      note = outcome?.result.exit_note ?? 'the session went away meanwhile';
    } else if (s) {
      moved = true;
      const exit = registry.entry(s.instance)?.instance.exit();
      newExit = exit !== undefined && isFreshExit(exit, { addresses: s.recentExits, domains: s.domains }, registry.bannedFor);
      if (!newExit) note = `no instance on an exit outside the session's last ${config.exitHistory} exits: moved to one that may repeat an exit`;
    }
    for (const other of v.move.slice(1)) if (sessions.get(other)?.instance === v.instance) this.moveAlong(other);
    return { moved, newExit, note };
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
    const targets = registry.targets(vacated, [...s.recentExits, leavingIp].filter((ip) => ip !== ''), [...s.domains], s, true);
    const moved = registry.sessions.rotate(key, targets.placement, 'report');
    if (!moved) return false;
    registry.noteLeftExit(key, leavingIp);
    this.deps.supply.vacated(vacated, s.recentExits);
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
    const { registry, lifecycle, supply, config, audit, log } = this.deps;
    const { sessions, exits } = registry;
    const { newnym } = how;
    const s = sessions.get(key);
    if (!s) throw noSuchSession();
    const vacated = s.instance;
    const leavingIp = registry.exitIpOf(vacated);
    const wish: ExitWish = {
      avoid: [...s.recentExits, leavingIp].filter((ip) => ip !== ''),
      domains: [...s.domains],
      // Rotation keeps the countries the session asked for.
      ...(s.params?.countries?.length ? { countries: s.params.countries } : {}),
    };
    let targets: { placement: Placement; fresh: boolean } = registry.targets(vacated, wish.avoid, wish.domains, s, true);
    let path: SupplyPath = !targets.fresh ? 'none' : targets.placement.routable.some((id) => registry.isSpare(id) && sessions.countOn(id) === 0) ? 'spare' : 'instance';
    if (!targets.fresh && exits) {
      const drawn = await supply.freshExitFor(key, vacated, wish);
      if (drawn !== null) {
        targets = { placement: { routable: [drawn.id], lastResort: null, fits: registry.fits }, fresh: true };
        path = !drawn.assigned ? 'spare' : drawn.spare ? 'spare_assigned' : 'idle_assigned';
      }
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
        message: `session ${what} from instance ${moved.from} to ${moved.to}${registry.isSpare(moved.to) ? ' (a spare)' : ''}${note ? ` (${note})` : ''}`,
        details: { from: moved.from, to: moved.to, newnym, new_exit: targets.fresh, reason: how.reason, supply: path },
      });
      // A spare it leaves without sessions gets a new exit at once: a newnym on top would only race it.
      const recycled = supply.vacated(vacated, s.recentExits);
      const old = registry.entry(vacated);
      if (newnym && !recycled && old?.instance.ready()) {
        lifecycle.rotateInstance(old, 'session', { session: key }).catch((err: unknown) => log.warn('newnym after session rotate failed', { instance: vacated, error: errorMessage(err) }));
      }
    } else if (!how.inPlace) {
      note = 'no other instance can take the session: it stays on its exit (a rotation would give its instance a new exit, moving every session on it)';
      // Audited like a move that found nowhere to go (from = to): the client was told moved: false.
      audit.record({
        type: 'assignment',
        session: key,
        instance: vacated,
        message: `session stays on instance ${vacated} after its failure report: ${note}`,
        details: { from: vacated, to: vacated, newnym, new_exit: false, reason: how.reason, supply: path },
      });
    } else {
      // Nowhere else to go (the SPEC's rule): the session stays and its instance gets a new exit
      // (or circuit) instead.
      const e = registry.entry(s.instance);
      if (!e || !e.instance.ready()) throw new ExitpoolError('EXITPOOL_NO_ROUTABLE_INSTANCE', 'no routable instance to rotate to');
      const plan = await lifecycle.rotateInstance(e, 'session', rotationFor(key, wish));
      registry.noteLeftExit(key, leavingIp);
      if (exits && plan.exit === '') note = plan.shortage || 'no exit could be assigned: a new circuit within the same selection';
      // A new pin takes well under a second: answer once it serves, so the session's next
      // request is not moved off its rotating instance onto an exit it just left.
      // A session asking for countries keeps its exit when there is no other there (re-pinned at
      // once): answering before that would find the instance mid-rotation and place it elsewhere.
      if (plan.exit !== '' || wish.countries !== undefined) await lifecycle.waitRotationEnd(e.instance, FRESH_EXIT_WAIT_MS);
    }
    const e = registry.entry(s.instance) as PoolEntry;
    const { exit_ip, exit_confirmed } = exitFieldsOf(e.instance.exit());
    return { moved: moved !== null, result: { session: key, instance: s.instance, exit_ip, exit_confirmed, new_exit: note === '', exit_note: note } };
  }
}
