import type { Config } from '../../shared/config/index.js';
import { errorMessage } from '../../shared/errors/error-message.js';
import type { Logger } from '../../shared/logger.js';
import { addressBlock, distinctKeys, type ExitRelay } from '../exits/exit-relay.js';
import { matchesNodeList } from '../exits/node-selection.js';
import { isFreshExit } from './exit-freshness.js';
import type { InstanceLifecycle, InstanceRotation } from './instance-lifecycle.js';
import type { InstanceRegistry } from './instance-registry.js';
import type { PoolEntry } from './pool-entry.js';

/**
 * A session rotation that finds no ready instance on a fresh exit assigns one to a free
 * instance (a spare, else an idle one of the pool) and waits this long for it (usually well
 * under a second) before settling for less.
 */
export const FRESH_EXIT_WAIT_MS = 15_000;

/** What a session's next exit must avoid, and where it must be. */
export interface ExitWish {
  /** Exit IPs (and their /24s): the session's recent exits and the one it leaves. */
  avoid: readonly string[];
  /** Sites it reported: exits banned for them do not qualify. */
  domains: readonly string[];
  /** Only an exit in one of these countries. */
  countries?: readonly string[];
}

export interface SpareSupplyDeps {
  registry: InstanceRegistry;
  lifecycle: Pick<InstanceLifecycle, 'rotateInstance' | 'waitRotationEnd'>;
  config: Pick<Config, 'torExitNodes' | 'torStrictNodes'>;
  log: Logger;
}

/**
 * The supply of fresh exits for session rotations in a busy pool (README.md here, "Spares"):
 * WARM_SPARES instances beyond POOL_SIZE that take no new session, each on an exit no other
 * instance has, ready to serve through it. A rotation that finds no instance on an
 * exit new to the session takes a warm spare (InstanceRegistry.targets); failing that, a free
 * instance (a spare, else an idle one of the pool) is given an exit that is new to the session
 * (freshExitFor). A spare its rotated sessions have all left is given another exit at once
 * (recycled), away from the exits of the session that last left it: the session most likely to
 * rotate again. Nothing here moves a session, and no instance with a session is re-pinned, so no
 * other session's exit changes.
 */
export class SpareSupply {
  /** Instances being given an exit for a waiting rotation: another rotation picks another one. */
  private readonly claimed = new Set<number>();
  /** Spares that carried sessions since their last exit: given a new one once they have none. */
  private readonly used = new Set<number>();
  /** Per spare, the exits of the session that last left it: its next exit avoids them when it can. */
  private readonly hints = new Map<number, readonly string[]>();

  constructor(private readonly deps: SpareSupplyDeps) {}

  /**
   * Whether an exit that no instance has could be given to instance `forId` now for `wish`: in
   * the catalog, eligible (not banned, within a strict TOR_EXIT_NODES, not held by another node,
   * not suspect), outside the wish's addresses and their /24s, in its countries. An estimate from
   * the exit assignments' public state, so that nothing is re-pinned in vain; the assignment
   * itself (ExitAssignments.next) decides.
   */
  qualifyingExitExists(forId: number, wish: ExitWish): boolean {
    return this.candidateExits(forId, wish.avoid, wish.domains, wish.countries, false).length > 0;
  }

  /**
   * Gives a free instance an exit new to the session and waits (FRESH_EXIT_WAIT_MS at most) until
   * it serves through it. Spares first (they are kept for this), then an idle instance of the
   * pool. Returns the instance, whether it is a spare, and whether it was given the exit for this
   * session (`assigned`; false for a spare already on its way to a suitable one), or null.
   */
  async freshExitFor(session: string, from: number, wish: ExitWish): Promise<{ id: number; spare: boolean; assigned: boolean } | null> {
    const { lifecycle } = this.deps;
    // A spare on its way to a new exit that suits the session (a recycle, often aimed at this
    // very session) is waited for: usually milliseconds, while the pin is applied.
    const arriving = this.freeInstances(from).find((e) => e.spare && e.instance.rotating() && this.headsFor(e, wish));
    if (arriving) return this.claimWhile(arriving, wish, async () => {
      await lifecycle.waitRotationEnd(arriving.instance, FRESH_EXIT_WAIT_MS);
      return false;
    });
    if (!this.qualifyingExitExists(from, wish)) return null;
    const e = this.freeInstances(from)[0];
    if (!e) return null;
    return this.claimWhile(e, wish, async () => {
      const plan = await lifecycle.rotateInstance(e, 'session', rotationFor(session, wish));
      if (plan.exit === '') return null;
      await lifecycle.waitRotationEnd(e.instance, FRESH_EXIT_WAIT_MS);
      return true;
    });
  }

  /** Runs `prepare` with `e` claimed; then `e`, if it serves through an exit new to the session. */
  private async claimWhile(e: PoolEntry, wish: ExitWish, prepare: () => Promise<boolean | null>): Promise<{ id: number; spare: boolean; assigned: boolean } | null> {
    const { registry } = this.deps;
    const id = e.instance.id;
    this.claimed.add(id);
    let assigned: boolean | null;
    try {
      assigned = await prepare();
    } finally {
      this.claimed.delete(id);
    }
    if (assigned === null) return null;
    const fresh = isFreshExit(e.instance.exit(), { addresses: wish.avoid, domains: wish.domains }, registry.bannedFor);
    return registry.entry(id) === e && registry.isRoutable(e) && fresh ? { id, spare: e.spare, assigned } : null;
  }

  /** Whether the exit instance `e` is assigned (the one it is rotating to) suits `wish`. */
  private headsFor(e: PoolEntry, wish: ExitWish): boolean {
    const exits = this.deps.registry.exits;
    const a = exits?.assignment(e.instance.id);
    if (!exits || !a) return false;
    const blocks = new Set(wish.avoid.map(addressBlock));
    return (
      !wish.avoid.includes(a.address) &&
      !blocks.has(a.block) &&
      (wish.countries === undefined || wish.countries.includes(a.country)) &&
      !exits.bannedFor({ fingerprint: a.fingerprint, address: a.address }, wish.domains)
    );
  }

  /**
   * A session left instance `id` (rotated, moved by a report): a spare it left without sessions
   * is given a new exit at once, away from the leaver's recent exits. true when that began.
   */
  vacated(id: number, leaverRecentExits: readonly string[] = []): boolean {
    const e = this.deps.registry.entry(id);
    if (!e?.spare) return false;
    this.used.add(id);
    if (leaverRecentExits.length > 0) this.hints.set(id, [...leaverRecentExits]);
    return this.recycleIfFree(e);
  }

  /**
   * The pool's tick: spares that carried sessions and have none left (they expired, were deleted,
   * moved by a quarantine) are given a new exit.
   */
  tick(): void {
    const { registry } = this.deps;
    for (const e of registry.all()) {
      if (!e.spare) continue;
      const id = e.instance.id;
      if (registry.sessions.countOn(id) > 0) this.used.add(id);
      else if (this.used.has(id)) this.recycleIfFree(e);
    }
  }

  /**
   * Instances without sessions a rotation may give an exit: free spares (one mid-way to a new
   * exit too: a new assignment supersedes it), then idle routable instances of the pool in random
   * order. Never `except`, nor one claimed by another rotation.
   */
  private freeInstances(except: number): PoolEntry[] {
    const { registry } = this.deps;
    const usable = (e: PoolEntry): boolean =>
      e.instance.id !== except &&
      !this.claimed.has(e.instance.id) &&
      registry.sessions.countOn(e.instance.id) === 0 &&
      e.instance.ready() &&
      e.instance.responsive() &&
      e.health.routable() &&
      !e.draining &&
      !e.retiring;
    const spares = [...registry.all()].filter((e) => e.spare && usable(e)).sort((a, b) => Number(a.instance.rotating()) - Number(b.instance.rotating()));
    const idle = registry
      .memberPlacement()
      .routable.map((id) => registry.entry(id) as PoolEntry)
      .filter((e) => !e.spare && usable(e));
    for (let i = idle.length - 1; i > 0; i--) {
      const j = Math.floor(Math.random() * (i + 1));
      [idle[i], idle[j]] = [idle[j] as PoolEntry, idle[i] as PoolEntry];
    }
    return [...spares, ...idle];
  }

  /**
   * Gives a used spare without sessions a new exit: one no other instance shares a unit with
   * (EXIT_DISTINCT), avoiding its last leaver's exits when the catalog allows. A spare whose
   * catalog holds no such exit keeps the one it has.
   */
  private recycleIfFree(e: PoolEntry): boolean {
    const { registry, lifecycle, log } = this.deps;
    const id = e.instance.id;
    if (!registry.exits || registry.sessions.countOn(id) > 0 || this.claimed.has(id)) return false;
    if (!e.instance.ready() || e.instance.rotating() || !e.health.routable() || e.draining || e.retiring) return false;
    const hint = this.hints.get(id) ?? [];
    const withHint = hint.length > 0 && this.candidateExits(id, hint, [], undefined, true).length > 0;
    if (!withHint && this.candidateExits(id, [], [], undefined, true).length === 0) return false;
    this.used.delete(id);
    this.hints.delete(id);
    // Not `untilCircuit`: the spare serves as soon as the pin is in force (milliseconds) and tor
    // builds its circuit within a second or so; a rotation that takes it sooner has its first
    // request build one (tens of milliseconds) instead of waiting for tor's housekeeping.
    const rotation: InstanceRotation = withHint ? { avoid: hint } : {};
    lifecycle.rotateInstance(e, 'spare', rotation).catch((err: unknown) => log.warn('a spare could not be given a new exit', { instance: id, error: errorMessage(err) }));
    return true;
  }

  /**
   * Exits instance `forId` could be given, outside `avoid` (addresses and their /24s) and within
   * `countries`: eligible, not its own, and either sharing no EXIT_DISTINCT unit with another
   * instance's exit (`distinct`) or at least no other instance's relay.
   */
  private candidateExits(forId: number, avoid: readonly string[], domains: readonly string[], countries: readonly string[] | undefined, distinct: boolean): ExitRelay[] {
    const { registry, config } = this.deps;
    const exits = registry.exits;
    if (!exits) return [];
    const own = exits.assignment(forId)?.fingerprint;
    const taken = new Set<string>();
    for (const e of registry.all()) {
      const id = e.instance.id;
      if (id === forId) continue;
      const a = exits.assignment(id);
      if (!a) continue;
      for (const k of distinct ? distinctKeys(a, exits.unit) : [`relay:${a.fingerprint}`]) taken.add(k);
    }
    const avoidAddresses = new Set(avoid);
    const avoidBlocks = new Set(avoid.map(addressBlock));
    const strict = config.torStrictNodes && config.torExitNodes.length > 0;
    return exits.catalog.all().filter(
      (r) =>
        r.fingerprint !== own &&
        !avoidAddresses.has(r.address) &&
        !avoidBlocks.has(r.block) &&
        (countries === undefined || countries.includes(r.country)) &&
        (!strict || matchesNodeList(r, config.torExitNodes)) &&
        !exits.bannedFor(r, domains) &&
        exits.holderOf(r.fingerprint) === undefined &&
        !exits.isSuspect(r.fingerprint) &&
        !distinctKeys(r, distinct ? exits.unit : 'relay').some((k) => taken.has(k)),
    );
  }
}

/** The rotation a session's move asks of an instance: away from its recent exits and the sites it reported, within its countries. */
export function rotationFor(session: string, wish: ExitWish): InstanceRotation {
  return { session, avoid: wish.avoid, avoidDomains: wish.domains, ...(wish.countries ? { countries: wish.countries } : {}) };
}
