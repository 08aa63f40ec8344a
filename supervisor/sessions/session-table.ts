import { sessionParamsTag, type SessionParams } from '../../shared/api/session-username.js';
import type { Session } from './session.js';

/** What the table needs to know about an instance to place a session on it. */
export interface Placement {
  /** Instances that take new traffic now (ready, not quarantined, not mid-rotation, not draining). */
  routable: readonly number[];
  /** Used only when nothing is routable and the pool has a single instance mid-rotation. */
  lastResort: number | null;
  /** Whether an instance can serve a session's choices (its countries); every instance can when absent. */
  fits?: (s: Session, instance: number) => boolean;
}

/**
 * `exit_down`: the session's exit died (the pool's own evidence). Not displacing: the session
 * keeps the live exit it was moved to, and no rebalance changes its exit again.
 */
export type AssignReason = 'new' | 'unroutable' | 'rotate' | 'drain' | 'quarantine' | 'site_ban' | 'report' | 'deleted' | 'retired' | 'rebalance' | 'params' | 'exit_down';

/**
 * Whether `s` was moved off `instance` by a quarantine: its exit was reported burnt there, so
 * rebalancing never sends it back (a drain or a rotation burnt nothing: those may go back).
 */
function fledQuarantine(s: Session, instance: number): boolean {
  return s.displaced?.burnt === true && s.displaced.from === instance;
}

/** Moves the pool made for its own reasons: the sessions they move may be rebalanced later. */
const DISPLACING: ReadonlySet<AssignReason> = new Set<AssignReason>(['unroutable', 'drain', 'quarantine', 'site_ban', 'retired']);
/** Moves that blame the exit: a rebalance never sends such a session back (its site, or everyone, is burnt there). */
const BURNT: ReadonlySet<AssignReason> = new Set<AssignReason>(['quarantine', 'site_ban']);

export interface Assignment {
  key: string;
  from: number | null;
  to: number;
  reason: AssignReason;
}

export type RouteOutcome =
  | { ok: true; session: Session; assignment: Assignment | null }
  | { ok: false; reason: 'no_routable_instance' | 'session_limit' };

/** A session as the durable state keeps it: everything but its incarnation and live connections. */
export type RestoredSession = Omit<Session, 'id' | 'active'>;

export interface CloseRecord {
  bytesUp: number;
  bytesDown: number;
  ok: boolean;
}

/**
 * The session table: same key, same instance until moved; new keys spread to the instance
 * with the fewest sessions (random tie-break). Map order doubles as an LRU (a touched session
 * is re-inserted at the end), so expiry and eviction look at the oldest entries first.
 */
export class SessionTable {
  private readonly sessions = new Map<string, Session>();
  private readonly byInstance = new Map<number, Set<string>>();
  private displaced = 0;
  private lastId = 0;
  /** Sessions with a lifetime of their own (expired by their own clock, not the LRU's). */
  private readonly ownLifetime = new Set<string>();
  /** Keys whose stored record is out of date (null: the durable state is off, nothing is tracked). */
  private changed: Set<string> | null = null;

  constructor(
    private readonly options: {
      maxSessions: number;
      ttlMs: number;
      random?: () => number;
      /** A session moved to another instance or left the table: routes cached for its key are stale. */
      onChanged?: (key: string) => void;
    },
  ) {}

  get size(): number {
    return this.sessions.size;
  }

  /** From now on, remember which keys changed (created, counted, moved, removed) for the durable state. */
  trackChanges(): void {
    this.changed ??= new Set();
  }

  /** A field the table does not own changed (a rotation's exit history, a reported site). */
  markChanged(key: string): void {
    this.changed?.add(key);
  }

  /** The keys changed since the last call; a key no longer in the table was removed. */
  takeChanged(): string[] {
    if (!this.changed || this.changed.size === 0) return [];
    const keys = [...this.changed];
    this.changed.clear();
    return keys;
  }

  /**
   * Puts back sessions read from the durable state, oldest seen first (the map's order is the
   * LRU order). They have no live connection; a key already in the table wins. Returns how many
   * were restored (never more than MAX_SESSIONS: the most recently seen are kept).
   */
  restore(stored: readonly RestoredSession[]): number {
    const room = Math.max(0, this.options.maxSessions - this.sessions.size);
    const newest = room === 0 ? [] : [...stored].sort((a, b) => a.lastSeen - b.lastSeen).slice(-room);
    let n = 0;
    for (const r of newest) {
      if (this.sessions.has(r.key)) continue;
      const session: Session = { ...r, id: ++this.lastId, active: 0, recentExits: [...r.recentExits], domains: [...r.domains] };
      delete (session as { displaced?: unknown }).displaced;
      if (r.params?.lifetimeMs !== undefined) this.ownLifetime.add(r.key);
      this.sessions.set(r.key, session);
      this.index(r.key, r.instance);
      if (r.displaced) this.setDisplaced(session, { ...r.displaced });
      n++;
    }
    return n;
  }

  /** Sessions the pool moved for its own reasons and has not moved back or seen rotated since. */
  get displacedCount(): number {
    return this.displaced;
  }

  get(key: string): Session | undefined {
    return this.sessions.get(key);
  }

  all(): IterableIterator<Session> {
    return this.sessions.values();
  }

  countOn(instance: number): number {
    return this.byInstance.get(instance)?.size ?? 0;
  }

  keysOn(instance: number): string[] {
    return [...(this.byInstance.get(instance) ?? [])];
  }

  /**
   * Finds or creates the session for a key and counts one new connection on it. A session
   * whose instance stopped being routable is moved first, so no connection is routed to an
   * instance mid-rotation or in quarantine.
   */
  route(key: string, placement: Placement, now: number, params?: SessionParams): RouteOutcome {
    const existing = this.sessions.get(key);
    if (existing) {
      let assignment: Assignment | null = null;
      const choicesChanged = params !== undefined && this.setParams(existing, params);
      const fits = placement.fits?.(existing, existing.instance) ?? true;
      if (!placement.routable.includes(existing.instance) || !fits) {
        const to = this.pick(placement, existing.instance, existing);
        if (to === null) return { ok: false, reason: 'no_routable_instance' };
        if (to !== existing.instance) assignment = this.move(existing, to, choicesChanged ? 'params' : 'unroutable');
      }
      this.countConnection(existing, now);
      return { ok: true, session: existing, assignment };
    }
    const draft = { key, params } as Session;
    const to = this.pick(placement, null, draft);
    if (to === null) return { ok: false, reason: 'no_routable_instance' };
    if (this.sessions.size >= this.options.maxSessions && !this.evictOne()) {
      return { ok: false, reason: 'session_limit' };
    }
    this.changed?.add(key);
    const session: Session = {
      key,
      id: ++this.lastId,
      instance: to,
      createdAt: now,
      lastSeen: now,
      requests: 0,
      failures: 0,
      bytesUp: 0,
      bytesDown: 0,
      active: 1,
      recentExits: [],
      domains: [],
    };
    if (params !== undefined) this.setParams(session, params);
    this.sessions.set(key, session);
    this.index(key, to);
    return { ok: true, session, assignment: { key, from: null, to, reason: 'new' } };
  }

  /**
   * A connection a worker routed with a cached route (a lease) instead of route(): counted as
   * route() counts one. false when `id` is no longer the key's session (it left meanwhile).
   */
  attach(key: string, id: number, now: number): boolean {
    const s = this.sessions.get(key);
    if (!s || s.id !== id) return false;
    this.countConnection(s, now);
    return true;
  }

  /** One more live connection on `s`, seen now. */
  private countConnection(s: Session, now: number): void {
    this.changed?.add(s.key);
    s.lastSeen = now;
    s.active += 1;
    this.touch(s);
  }

  /**
   * A connection of session `id` ended; counters are exact, active never goes negative. A
   * connection of an earlier incarnation of the key is not this session's.
   */
  close(key: string, id: number, record: CloseRecord, now: number): void {
    const s = this.sessions.get(key);
    if (!s || s.id !== id) return;
    this.changed?.add(key);
    s.active = Math.max(0, s.active - 1);
    s.requests += 1;
    if (!record.ok) s.failures += 1;
    s.bytesUp += record.bytesUp;
    s.bytesDown += record.bytesDown;
    s.lastSeen = now;
    this.touch(s);
  }

  /** Drops connections of session `id` (a dead worker's, or routes never used) without counting them as requests. */
  forgetConnections(key: string, id: number, count: number): void {
    const s = this.sessions.get(key);
    if (s && s.id === id) s.active = Math.max(0, s.active - count);
  }

  /**
   * A session's choices from its latest username with parameters; true when they changed. Its
   * own lifetime makes expiry look at it apart from the LRU order.
   */
  private setParams(s: Session, params: SessionParams): boolean {
    if (s.params !== undefined && sessionParamsTag(s.params) === sessionParamsTag(params)) return false;
    if (Object.keys(params).length === 0) delete s.params;
    else s.params = params;
    if (params.lifetimeMs !== undefined) this.ownLifetime.add(s.key);
    else this.ownLifetime.delete(s.key);
    this.changed?.add(s.key);
    return true;
  }

  /**
   * A connection of a rotating session (mode-rotating) goes through `to`: the session follows
   * without an assignment event (it changes instance on every connection by its own choice).
   */
  useInstance(key: string, to: number): void {
    const s = this.sessions.get(key);
    if (!s || s.instance === to) return;
    this.unindex(key, s.instance);
    s.instance = to;
    this.index(key, to);
    this.changed?.add(key);
  }

  /** Moves one session to another routable instance (its client asked: a rotation, or a report); null when there is nowhere else to go. */
  rotate(key: string, placement: Placement, reason: 'rotate' | 'report' = 'rotate'): Assignment | null {
    const s = this.sessions.get(key);
    if (!s) return null;
    const others = placement.routable.filter((i) => i !== s.instance);
    const to = this.pick({ ...placement, routable: others, lastResort: null }, s.instance, s);
    if (to === null) return null;
    return this.move(s, to, reason);
  }

  /** Moves every session off an instance (drain, quarantine, retire), or those `only` selects (a site ban). */
  moveOff(instance: number, placement: Placement, reason: AssignReason, only?: (s: Session) => boolean): Assignment[] {
    const others = { ...placement, routable: placement.routable.filter((i) => i !== instance), lastResort: null };
    const moved: Assignment[] = [];
    for (const key of this.keysOn(instance)) {
      const s = this.sessions.get(key) as Session;
      if (only && !only(s)) continue;
      const to = this.pick(others, instance, s);
      if (to === null) continue; // nowhere to go: it stays and is moved (or given an exit) on its next request
      moved.push(this.move(s, to, reason));
    }
    return moved;
  }

  /**
   * After instances come back (released, remediated, restarted), spreads the sessions an
   * episode piled onto the rest: while a routable instance holds more than its share (the
   * sessions on routable instances over their number, rounded up), its displaced sessions with
   * no live connection move to instances under their share, never back onto an instance a
   * quarantine moved them off (a captcha quarantine can end with one new circuit: sending its
   * sessions straight back would undo the move their client's report asked for). Sessions their clients
   * placed or rotated are never moved, and none is moved while it has a connection: a move
   * changes its exit.
   *
   * That exclusion makes it an assignment problem; filling the most constrained instance first
   * (the one the fewest movable sessions may go to) reaches the share whenever the excluded
   * sessions leave enough for each.
   */
  rebalance(placement: Placement): Assignment[] {
    const routable = placement.routable;
    if (routable.length < 2) return [];
    let total = 0;
    for (const id of routable) total += this.countOn(id);
    const share = Math.ceil(total / routable.length);
    const moved: Assignment[] = [];
    const filled = new Set<number>();
    for (;;) {
      const sources = routable.filter((id) => this.countOn(id) > share).sort((a, b) => this.countOn(b) - this.countOn(a));
      const targets = routable.filter((id) => this.countOn(id) < share && !filled.has(id));
      if (sources.length === 0 || targets.length === 0) break;
      // Movable sessions on the sources, and how many of them each instance was moved off.
      let movable = 0;
      const fledFrom = new Map<number, number>();
      for (const from of sources) {
        for (const key of this.keysOn(from)) {
          const s = this.sessions.get(key) as Session;
          if (s.displaced === undefined || s.active > 0) continue;
          movable++;
          if (s.displaced.burnt) fledFrom.set(s.displaced.from, (fledFrom.get(s.displaced.from) ?? 0) + 1);
        }
      }
      if (movable === 0) break;
      const eligible = (id: number): number => movable - (fledFrom.get(id) ?? 0);
      const to = targets.reduce((a, b) => (eligible(b) < eligible(a) ? b : a));
      filled.add(to);
      for (const from of sources) {
        for (const key of this.keysOn(from)) {
          if (this.countOn(from) <= share || this.countOn(to) >= share) break;
          const s = this.sessions.get(key) as Session;
          if (s.displaced === undefined || s.active > 0 || fledQuarantine(s, to)) continue;
          if (placement.fits && !placement.fits(s, to)) continue;
          moved.push(this.move(s, to, 'rebalance'));
        }
      }
    }
    this.rebalanceThroughThird(routable, share, moved);
    return moved;
  }

  /**
   * What the direct moves leave after a quarantine episode: an instance over its share whose
   * movable sessions all fled the one instance under it. One of them goes to a third instance,
   * which hands the instance under its share a session that did not flee it. Two moves for one,
   * so only for sessions a quarantine displaced (the episodes whose piles rebalancing exists
   * for), never for those a rotation or a drain moved for a moment.
   */
  private rebalanceThroughThird(routable: readonly number[], share: number, moved: Assignment[]): void {
    const movableOn = (id: number, notFrom: number): Session | undefined => {
      for (const key of this.keysOn(id)) {
        const s = this.sessions.get(key) as Session;
        if (s.displaced?.burnt === true && s.active === 0 && !fledQuarantine(s, notFrom)) return s;
      }
      return undefined;
    };
    // Each round moves a session onto an instance under its share: the rounds are bounded by the sessions.
    for (let round = 0; round < this.sessions.size; round++) {
      let progressed = false;
      for (const over of routable.filter((id) => this.countOn(id) > share)) {
        for (const under of routable.filter((id) => this.countOn(id) < share)) {
          for (const third of routable) {
            if (third === over || third === under) continue;
            const toUnder = movableOn(third, under);
            const toThird = toUnder && movableOn(over, third);
            if (!toUnder || !toThird) continue;
            moved.push(this.move(toUnder, under, 'rebalance'), this.move(toThird, third, 'rebalance'));
            progressed = true;
            break;
          }
          if (progressed) break;
        }
        if (progressed) break;
      }
      if (!progressed) return;
    }
  }

  delete(key: string): boolean {
    const s = this.sessions.get(key);
    if (!s) return false;
    this.remove(s);
    return true;
  }

  /**
   * Removes sessions idle for longer than their lifetime (their own, or the TTL); a session with
   * a live connection is never idle.
   */
  expire(now: number): string[] {
    const removed: string[] = [];
    for (const key of this.ownLifetime) {
      const s = this.sessions.get(key);
      if (!s || s.active > 0 || now - s.lastSeen < (s.params?.lifetimeMs ?? this.options.ttlMs)) continue;
      this.remove(s);
      removed.push(key);
    }
    for (const s of this.sessions.values()) {
      // Entries are in last-seen order, so the first one still inside the TTL ends the scan.
      if (now - s.lastSeen < this.options.ttlMs) break;
      if (s.active > 0 || s.params?.lifetimeMs !== undefined) continue;
      this.remove(s);
      removed.push(s.key);
    }
    return removed;
  }

  private evictOne(): boolean {
    for (const s of this.sessions.values()) {
      if (s.active > 0) continue;
      this.remove(s);
      return true;
    }
    return false;
  }

  private pick(placement: Placement, avoid: number | null, s?: Session): number | null {
    const all = placement.routable.length > 0 ? placement.routable : placement.lastResort !== null ? [placement.lastResort] : [];
    const fits = placement.fits;
    const candidates = fits && s ? all.filter((id) => fits(s, id)) : all;
    if (candidates.length === 0) return null;
    let best: number[] = [];
    let bestCount = Infinity;
    for (const id of candidates) {
      // The instance being left counts as fuller than it is, so a move really moves.
      const count = this.countOn(id) + (id === avoid ? 0.5 : 0);
      if (count < bestCount) {
        bestCount = count;
        best = [id];
      } else if (count === bestCount) {
        best.push(id);
      }
    }
    const r = this.options.random ?? Math.random;
    return best[Math.floor(r() * best.length)] as number;
  }

  private move(s: Session, to: number, reason: AssignReason): Assignment {
    const from = s.instance;
    this.unindex(s.key, from);
    s.instance = to;
    this.index(s.key, to);
    this.changed?.add(s.key);
    this.options.onChanged?.(s.key);
    // A rebalance keeps the mark (and the instance the session fled): instances come back one at a
    // time, and a session spread onto the first one back may be spread again when the next comes.
    if (reason !== 'rebalance') this.setDisplaced(s, DISPLACING.has(reason) ? { from, burnt: BURNT.has(reason) } : undefined);
    return { key: s.key, from, to, reason };
  }

  private setDisplaced(s: Session, displaced: Session['displaced']): void {
    if ((s.displaced === undefined) !== (displaced === undefined)) this.displaced += displaced === undefined ? -1 : 1;
    if (displaced === undefined) delete s.displaced;
    else s.displaced = displaced;
  }

  /** Every way a session leaves the table. */
  private remove(s: Session): void {
    this.sessions.delete(s.key);
    this.ownLifetime.delete(s.key);
    this.unindex(s.key, s.instance);
    this.setDisplaced(s, undefined);
    this.changed?.add(s.key);
    this.options.onChanged?.(s.key);
  }

  private touch(s: Session): void {
    this.sessions.delete(s.key);
    this.sessions.set(s.key, s);
  }

  private index(key: string, instance: number): void {
    let set = this.byInstance.get(instance);
    if (!set) {
      set = new Set();
      this.byInstance.set(instance, set);
    }
    set.add(key);
  }

  private unindex(key: string, instance: number): void {
    const set = this.byInstance.get(instance);
    if (!set) return;
    set.delete(key);
    if (set.size === 0) this.byInstance.delete(instance);
  }
}
