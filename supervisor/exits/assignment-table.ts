import type { ExitCatalog } from './exit-catalog.js';
import { distinctKeys, type DistinctUnit, type ExitRelay } from './exit-relay.js';

/** An instance's exit as the durable state keeps it. */
export interface RestoredAssignment {
  fingerprint: string;
  nickname: string;
  address: string;
}

/** An instance's exit. */
export interface Assignment {
  relay: ExitRelay;
  /** False when it was assigned in a shortage (it shares a unit, said out loud); such an exit claims no fleet unit lease. */
  distinct: boolean;
  /** Chosen for a session's own request (its countries, its recent exits): never moved for sharing a relay. */
  forSession?: boolean;
}

/**
 * Who holds which exit, and the distinctness questions (EXIT_DISTINCT) every part of the exits
 * asks of it: this node's instances (assigned, or reserved since a restart) and, on a node of a
 * fleet, the exits and units other nodes lease. One table, so the choice, the fleet's yields,
 * the egress reactions and the spread off shared relays all count the same holders.
 */
export class AssignmentTable {
  readonly assigned = new Map<number, Assignment>();
  /**
   * Exits instances had before a restart (durable state), by instance: each gets its own back at
   * bootstrap when it is still in the consensus and not banned, and no other instance is given
   * it meanwhile. An entry goes once its instance has asked.
   */
  readonly restored = new Map<number, RestoredAssignment>();
  /** Instances whose last request for an exit found none, or only a shared one: the shortage the API reports. */
  readonly shortage = new Map<number, string>();
  /** Exits another node of the fleet holds a lease on, with that node's name (supervisor/fleet): never assigned here. Empty on a node of its own. */
  heldElsewhere: ReadonlyMap<string, string> = new Map();
  /** Distinctness units (`block:…`, `family:…`) other nodes' instances hold (key → node), as the fleet last read them. */
  unitsHeldElsewhere: ReadonlyMap<string, string> = new Map();

  constructor(
    private readonly catalog: ExitCatalog,
    readonly unit: DistinctUnit,
  ) {}

  /** The instances assigned `fingerprint` now. */
  instancesOn(fingerprint: string): number[] {
    return [...this.assigned].filter(([, a]) => a.relay.fingerprint === fingerprint).map(([id]) => id);
  }

  /** Exits this node holds leases on: those assigned, and those kept for instances since a restart. */
  heldFingerprints(): Set<string> {
    return new Set([...[...this.assigned.values()].map((a) => a.relay.fingerprint), ...[...this.restored.values()].map((r) => r.fingerprint)]);
  }

  /**
   * The units beyond the relay (`block:<egress /24>`, `family:<fp>`) this node's instances hold
   * on exits assigned as distinct, key → fingerprint: what the fleet leases. Exits assigned in a
   * shortage lease none: they share by necessity.
   */
  heldUnits(): Map<string, string> {
    const out = new Map<string, string>();
    for (const a of this.assigned.values()) {
      if (!a.distinct) continue;
      const relay = this.current(a);
      for (const k of distinctKeys(relay, this.unit)) if (!k.startsWith('relay:')) out.set(k, relay.fingerprint);
    }
    return out;
  }

  /** The instances holding, as distinct, an exit within unit `key`. */
  distinctIn(key: string): number[] {
    return [...this.assigned].filter(([, a]) => a.distinct && distinctKeys(this.current(a), this.unit).includes(key)).map(([id]) => id);
  }

  /** The exits every other instance here is assigned (but those in `leaving`). */
  assignedBesides(id: number, leaving: ReadonlySet<number> = new Set()): ExitRelay[] {
    return [...this.assigned].filter(([other]) => other !== id && !leaving.has(other)).map(([, a]) => a.relay);
  }

  /** The exits every other instance here is assigned (but those in `leaving`) or has reserved since a restart (reserved ones stay theirs until they ask). */
  takenBesides(id: number, leaving: ReadonlySet<number> = new Set()): ExitRelay[] {
    const reserved = [...this.restored].filter(([other]) => other !== id).flatMap(([, r]) => this.catalog.get(r.fingerprint) ?? []);
    return [...this.assignedBesides(id, leaving), ...reserved];
  }

  /**
   * Whether instance `id`'s exit shares a unit with another instance's, here or (leased) on
   * another node; the instances in `leaving` counted as gone, the relays in `arriving` as taken.
   */
  sharesUnit(id: number, leaving: ReadonlySet<number> = new Set(), arriving: readonly ExitRelay[] = []): boolean {
    const a = this.assigned.get(id);
    if (!a) return false;
    const used = this.keysTakenBesides(id, { leaving, arriving });
    return distinctKeys(a.relay, this.unit).some((k) => used.has(k));
  }

  /**
   * Whether `relay`, given back to instance `id` after a restart, shares a unit with an exit
   * another instance here is assigned, or with a unit another node leases. Exits still reserved
   * since the restart do not count: of two that shared before it, the first to claim its exit is
   * the distinct one and the second the one in a shortage, as when they were first chosen
   * (counting reserved ones would put both in one, where only one of them is beyond the units).
   */
  restoredShares(id: number, relay: ExitRelay): boolean {
    const used = this.keysTakenBesides(id, { reserved: false });
    return distinctKeys(relay, this.unit).some((k) => used.has(k));
  }

  /**
   * Records whether instance `id` is in a shortage, the note `exit_shortage` and `GET /api/exits`
   * show: none when it does not share; else "`what` shares its /24 with another instance's", with
   * `detail` in brackets, or where the other holder may be when another node leases units.
   * Returns the note ('' without a shortage). Every part that decides a shortage says it here.
   */
  noteShortage(id: number, shares: boolean, what: string, detail?: string): string {
    if (!shares) {
      this.shortage.delete(id);
      return '';
    }
    const where = detail !== undefined ? ` (${detail})` : this.unitsHeldElsewhere.size > 0 ? ' (on this node or another of the fleet)' : '';
    const note = `${what} shares its ${this.unitWord()} with another instance's${where}`;
    this.shortage.set(id, note);
    return note;
  }

  /**
   * Instances assigned in a shortage (`distinct: false`) that share no unit any more (the other
   * holder moved, stopped, or its node died): distinct again, their shortage gone. Returns them.
   */
  endShortages(): number[] {
    const alone = [...this.assigned].filter(([id, a]) => !a.distinct && !this.sharesUnit(id)).map(([id]) => id);
    for (const id of alone) {
      (this.assigned.get(id) as Assignment).distinct = true;
      this.shortage.delete(id);
    }
    return alone;
  }

  /**
   * Whether instance `id`'s exit shares a unit with another instance's while one of `eligible`
   * (read only then) shares none and is not suspect: a move would make it distinct.
   */
  sharesAvoidably(id: number, eligible: () => readonly ExitRelay[], isSuspect: (fingerprint: string) => boolean): boolean {
    const a = this.assigned.get(id);
    if (!a) return false;
    // One count of the taken keys serves both questions: does it share, and would another exit not.
    const used = this.keysTakenBesides(id);
    if (!distinctKeys(a.relay, this.unit).some((k) => used.has(k))) return false;
    return eligible().some((e) => e.fingerprint !== a.relay.fingerprint && !isSuspect(e.fingerprint) && !distinctKeys(e, this.unit).some((k) => used.has(k)));
  }

  /** The word for the unit in messages: `/24` for `subnet`. */
  unitWord(): string {
    return this.unit === 'subnet' ? '/24' : this.unit;
  }

  /** What the durable state keeps: each instance's exit (assigned, or restored and not yet claimed). */
  toStore(): Map<number, RestoredAssignment> {
    const out = new Map<number, RestoredAssignment>(this.restored);
    for (const [id, a] of this.assigned) out.set(id, { fingerprint: a.relay.fingerprint, nickname: a.relay.nickname, address: a.relay.address });
    return out;
  }

  /** Every assignment's relay read again from the catalog (an egress address may have changed). */
  reread(): void {
    for (const a of this.assigned.values()) a.relay = this.current(a);
  }

  /**
   * The keys (EXIT_DISTINCT) other instances' exits hold, here and (fleet) on other nodes, with
   * how many hold each; `leaving` and `arriving` as in `sharesUnit`; exits reserved since a
   * restart counted unless `reserved` is false (`restoredShares`).
   */
  private keysTakenBesides(id: number, o: { leaving?: ReadonlySet<number>; arriving?: readonly ExitRelay[]; reserved?: boolean } = {}): Map<string, number> {
    const { leaving = new Set<number>(), arriving = [], reserved = true } = o;
    const used = new Map<string, number>();
    const staying = reserved ? this.takenBesides(id, leaving) : this.assignedBesides(id, leaving);
    for (const t of [...staying, ...arriving]) for (const k of distinctKeys(t, this.unit)) used.set(k, (used.get(k) ?? 0) + 1);
    for (const k of this.unitsHeldElsewhere.keys()) used.set(k, (used.get(k) ?? 0) + 1);
    return used;
  }

  /** An assignment's relay as the catalog knows it now (its egress address may be newer). */
  private current(a: Assignment): ExitRelay {
    return this.catalog.get(a.relay.fingerprint) ?? a.relay;
  }
}
