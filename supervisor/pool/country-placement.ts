import type { RouteRefusal } from '../../shared/ipc/protocol.js';
import { COUNTRY_EXIT_WAIT_MS } from '../../shared/config/limits.js';
import type { Session } from '../sessions/session.js';
import type { InstanceLifecycle } from './instance-lifecycle.js';
import type { InstanceRegistry } from './instance-registry.js';
import type { PoolEntry } from './pool-entry.js';

/**
 * Instances that have sessions are given an exit in another country for a session's first
 * request one per this interval, pool-wide (idle instances any time): asking for countries is
 * open to any proxy token, and each such move costs the instance's sessions their exit. Requests
 * wait for their turn within COUNTRY_EXIT_WAIT_MS and are refused beyond it.
 */
export const BUSY_REASSIGNMENT_INTERVAL_MS = 2_000;

/**
 * Sessions whose username named countries (docs/api.md, "Session parameters in the username"):
 * which instances may serve them, and an exit there when none does. A session asking for a
 * country no instance's exit is in waits while the least-loaded instance whose sessions asked
 * for no country is given an exit there (honouring bans and distinctness through the exit
 * assignment), at most COUNTRY_EXIT_WAIT_MS; concurrent requests for the same countries wait for
 * the same assignment. Sessions in mode-rotating take a different instance per connection.
 */
export class CountryPlacement {
  private readonly waits = new Map<string, Promise<{ refusal: RouteRefusal; detail: string } | null>>();
  /** Instances being given an exit for a request now: another request picks another one. */
  private readonly claimed = new Set<number>();
  /** When the next busy instance may be reassigned (BUSY_REASSIGNMENT_INTERVAL_MS after the last). */
  private nextBusySlot = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly registry: InstanceRegistry,
    private readonly lifecycle: Pick<InstanceLifecycle, 'rotateInstance' | 'waitRotationEnd'>,
    private readonly now: () => number = Date.now,
    private readonly sleep: (ms: number) => Promise<void> = (ms) => new Promise((resolve) => setTimeout(resolve, ms).unref()),
  ) {}

  /** Whether some routable instance of the pool (spares take no new session) leaves from one of `countries` now. */
  served(countries: readonly string[]): boolean {
    return this.registry.memberPlacement().routable.some((id) => countries.includes(this.registry.countryOf(id)));
  }

  /**
   * Makes some routable instance leave from one of `countries`, for `key`'s first request:
   * null once one does, else why not (no usable exit there, or it did not serve in time).
   */
  ensure(countries: readonly string[], key: string): Promise<{ refusal: RouteRefusal; detail: string } | null> {
    const tag = [...countries].sort().join(',');
    let wait = this.waits.get(tag);
    if (!wait) {
      wait = this.assign(countries, key).finally(() => this.waits.delete(tag));
      this.waits.set(tag, wait);
    }
    return wait;
  }

  private async assign(countries: readonly string[], key: string): Promise<{ refusal: RouteRefusal; detail: string } | null> {
    const named = countries.join(', ');
    const exits = this.registry.exits;
    if (!exits || !exits.hasEligibleIn(countries)) {
      const why = exits ? 'none in the exit catalog that is not banned' : 'PIN_EXIT_RELAY is off, so exits cannot be chosen by country';
      return { refusal: 'no_exit_in_country', detail: `no exit in ${named}: ${why}` };
    }
    const sessions = this.registry.sessions;
    const askedForCountry = (id: number): boolean => sessions.keysOn(id).some((k) => (sessions.get(k)?.params?.countries?.length ?? 0) > 0);
    // Idle first, then the least loaded, those whose sessions asked for no country before the rest;
    // never one mid-rotation or being given an exit for another request.
    const pick = (): PoolEntry | undefined =>
      this.registry
        .memberPlacement()
        .routable.map((id) => this.registry.entry(id) as PoolEntry)
        .filter((x) => !x.instance.rotating() && !this.claimed.has(x.instance.id))
        .sort((a, b) => Number(askedForCountry(a.instance.id)) - Number(askedForCountry(b.instance.id)) || sessions.countOn(a.instance.id) - sessions.countOn(b.instance.id))[0];
    const busyRefusal = { refusal: 'country_wait_timeout' as const, detail: `every instance is being given an exit; retry` };
    let e = pick();
    if (!e) return this.registry.routableCount() === 0 ? { refusal: 'no_routable_instance', detail: 'no instance can serve this request' } : busyRefusal;
    const deadline = this.now() + COUNTRY_EXIT_WAIT_MS;
    // An instance with sessions loses their exit to the move: a proxy token asking for one country
    // after another must not churn the whole pool, so busy instances are taken one per interval
    // (requests queue for their turn within the bound, and are refused beyond it).
    if (sessions.countOn(e.instance.id) > 0) {
      const now = this.now();
      const slot = Math.max(now, this.nextBusySlot);
      if (slot > deadline - BUSY_REASSIGNMENT_INTERVAL_MS) {
        return { refusal: 'country_wait_timeout', detail: `no idle instance can be given an exit in ${named} within ${COUNTRY_EXIT_WAIT_MS / 1000} s (busy instances are reassigned one per ${BUSY_REASSIGNMENT_INTERVAL_MS / 1000} s); retry` };
      }
      this.nextBusySlot = slot + BUSY_REASSIGNMENT_INTERVAL_MS;
      if (slot > now) {
        await this.sleep(slot - now);
        if (this.served(countries)) return null;
        e = pick();
        if (!e) return busyRefusal;
      }
    }
    this.claimed.add(e.instance.id);
    try {
      const plan = await this.lifecycle.rotateInstance(e, 'country', { session: key, countries });
      if (plan.exit === '') return { refusal: 'no_exit_in_country', detail: `no exit in ${named}: ${plan.shortage || 'none could be assigned'}` };
      await this.lifecycle.waitRotationEnd(e.instance, Math.max(0, deadline - this.now()));
    } finally {
      this.claimed.delete(e.instance.id);
    }
    if (this.served(countries)) return null;
    return { refusal: 'country_wait_timeout', detail: `an exit in ${named} was assigned but did not serve within ${COUNTRY_EXIT_WAIT_MS / 1000} s; retry` };
  }

  /**
   * The instance a rotating session's next connection goes through: another fitting one when
   * there is one, of the pool's (a spare takes only sessions that rotate onto it by request).
   */
  nextRotating(s: Session, routable: readonly number[]): number | undefined {
    const members = routable.filter((id) => !this.registry.isSpare(id));
    const fitting = (members.length > 0 ? members : routable).filter((id) => this.registry.fits(s, id));
    const others = fitting.filter((id) => id !== s.instance);
    const pool = others.length > 0 ? others : fitting;
    return pool[Math.floor(Math.random() * pool.length)];
  }
}
