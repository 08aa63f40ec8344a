import type { AssignmentTable } from './assignment-table.js';
import { instancesWord, type ExitAnnouncer } from './exit-announcer.js';
import type { ExitCatalog } from './exit-catalog.js';

/**
 * What this node does when another node of the fleet holds an exit or a unit (a /24, a family)
 * its own instances have: both chose it before either's lease was seen, and the other node keeps
 * it (supervisor/fleet, "Exits and units"). Reads and writes the one `AssignmentTable`; says
 * every decision through the announcer.
 */
export class FleetYields {
  /** Instances told to move by this renewal's yields: the spread that ends the renewal does not tell them again. */
  private readonly told = new Set<number>();

  constructor(
    private readonly table: AssignmentTable,
    private readonly catalog: ExitCatalog,
    /** Whether instance `id` shares a unit while an eligible exit would not (it can move to a unit of its own). */
    private readonly sharesAvoidably: (id: number) => boolean,
    private readonly say: ExitAnnouncer,
  ) {}

  /**
   * Another node holds the lease on a unit instances here were assigned as distinct: each moves
   * to another exit when one would give it a unit of its own; otherwise it keeps its exit, now
   * `distinct: false` (a shortage: it claims no unit lease, the other node keeps the unit).
   * Moving it anyway would put it on a relay another instance here holds, which is worse than a
   * shared /24.
   */
  yieldUnit(key: string, node: string): void {
    const ids = this.table.distinctIn(key);
    if (ids.length === 0) return;
    const known = this.table.unitsHeldElsewhere.get(key) === node;
    this.table.unitsHeldElsewhere = new Map(this.table.unitsHeldElsewhere).set(key, node);
    const moving = ids.filter((id) => this.sharesAvoidably(id));
    const staying = ids.filter((id) => !moving.includes(id));
    for (const id of staying) {
      (this.table.assigned.get(id) as { distinct: boolean }).distinct = false;
      this.table.noteShortage(id, true, 'every eligible exit');
    }
    const unit = key.replace(/^block:/, '/24 ').replace(/^family:/, 'family ');
    const said = [
      moving.length > 0 ? `${instancesWord(moving)} move${moving.length === 1 ? 's' : ''} to another exit` : '',
      staying.length > 0 ? `${instancesWord(staying)} keep${staying.length === 1 ? 's' : ''} ${staying.length === 1 ? 'its exit' : 'their exits'}, sharing it (every other eligible exit shares one too)` : '',
    ].filter((s) => s !== '');
    if (!known) this.say.audit(ids[0] ?? null, `${unit} is held by node ${node}: ${said.join('; ')}`, {
      unit: key,
      node,
      instances: ids,
      moving,
      staying,
      reason: 'unit_held_by_other_node',
    });
    for (const id of moving) this.told.add(id);
    if (moving.length > 0) this.say.exitGone(moving);
  }

  /** Another node holds the lease on an exit instances here were assigned: they move to another exit; the other node keeps it. */
  yieldExit(fingerprint: string, node: string): void {
    const ids = this.table.instancesOn(fingerprint);
    if (ids.length === 0) return;
    const known = this.table.heldElsewhere.get(fingerprint) === node;
    this.table.heldElsewhere = new Map(this.table.heldElsewhere).set(fingerprint, node);
    const relay = this.catalog.get(fingerprint);
    // Said once; an instance still bootstrapping is asked again by the next reconciliation.
    if (!known) this.say.audit(ids[0] ?? null, `exit ${relay?.nickname ?? fingerprint} is held by node ${node}: ${instancesWord(ids)} move${ids.length === 1 ? 's' : ''} to another exit`, {
      fingerprint,
      node,
      instances: ids,
      reason: 'held_by_other_node',
    });
    for (const id of ids) this.told.add(id);
    this.say.exitGone(ids);
  }

  /** Instances this renewal's yields told to move so far. */
  toldToMove(): ReadonlySet<number> {
    return this.told;
  }

  /** The renewal ended (the units other nodes hold were read, the last step of one). */
  renewalDone(): void {
    this.told.clear();
  }
}
