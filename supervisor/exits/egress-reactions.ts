import type { GetInfo } from '../tor/relay-directory.js';
import type { ProbeRoute } from './egress-prober.js';
import type { AssignmentTable } from './assignment-table.js';
import type { ExitAnnouncer } from './exit-announcer.js';
import type { ExitCatalog } from './exit-catalog.js';
import type { ExitEgress } from './exit-egress.js';

/** What the reactions to measured addresses read and act through (ExitAssignments hands them its own). */
export interface EgressReactionsParts {
  table: AssignmentTable;
  catalog: ExitCatalog;
  egress: ExitEgress;
  /** Control ports by instance, the newest last: any instance's GeoIP database can place an address. */
  sources: ReadonlyMap<number, GetInfo>;
  /** Whether instance `id` shares a unit while an eligible exit would not (it can move to a unit of its own). */
  sharesAvoidably: (id: number) => boolean;
  /** Ends the shortages a changed address may have ended (ExitAssignments.spreadOffSharedExits); `besides` are moving already. */
  spread: (besides: ReadonlySet<number>) => void;
  say: ExitAnnouncer;
}

/**
 * What the pool does with the addresses exits leave from (README.md, "What sites see"): a pinned
 * exit is measured, a failure about the exit becomes evidence, and an address that turns out to
 * share a /24 with another instance's moves the instance while another exit would not. Every
 * assignment is judged by the address sites see, not the one the consensus publishes.
 */
export class EgressReactions {
  constructor(private readonly parts: EgressReactionsParts) {}

  /** ExitSteering.egressPinned: measures the pinned exit unless known; whether the instance keeps it. */
  async pinned(id: number, fingerprint: string, socks: ProbeRoute, settling: boolean): Promise<{ keep: boolean }> {
    const { table, catalog, egress, sources, say } = this.parts;
    egress.route(id, socks);
    // A list fetched through the pool can be read once an instance can fetch it.
    if (egress.listDue() && egress.listReadable()) void this.refreshList();
    // Any instance's GeoIP database places the new address: its own control port first.
    const measured = await egress.measure(id, fingerprint, sources.get(id) ?? [...sources.values()].at(-1));
    if (table.assigned.get(id)?.relay.fingerprint !== fingerprint) return { keep: true }; // moved on meanwhile
    if (measured.kind === 'failed' && measured.outcome.aboutExit) {
      const evidence = egress.failureEvidence(id, fingerprint, measured.outcome);
      const relay = catalog.get(fingerprint);
      say.audit(id, `the egress probe through exit ${relay?.nickname ?? fingerprint} (instance ${id}) failed: ${measured.outcome.detail}; its address stays ${relay?.address ?? 'unknown'} (${relay?.addressSource ?? 'published'})`, {
        fingerprint,
        reason: 'egress_probe_failed',
        failure: measured.outcome.failure,
        echo_answered_elsewhere: evidence.echoAnswered,
      });
      say.egressFailed(evidence);
    }
    // Only new knowledge is reacted to: the choice already weighed what was known (a session's
    // history, its countries), and a measurement that confirms it changes nothing.
    const changed = measured.kind === 'measured' && measured.address !== measured.previous;
    if (changed) {
      const relay = catalog.get(fingerprint);
      if (relay) {
        say.audit(id, `exit ${relay.nickname} leaves from ${measured.address}${measured.address === relay.published ? ', its published address' : `, not its published ${relay.published}`}${relay.country ? ` (${relay.country})` : ''}`, {
          fingerprint,
          reason: 'egress_measured',
          address: measured.address,
          published: relay.published,
          previous: measured.previous,
          country: relay.country,
        });
      }
      this.afterChange([fingerprint], id);
    }
    if (!changed || !this.parts.sharesAvoidably(id)) return { keep: true };
    const relay = catalog.get(fingerprint);
    say.audit(id, `exit ${relay?.nickname ?? fingerprint} of instance ${id} leaves from ${relay?.address ?? '?'}, which shares its ${table.unitWord()} with another instance's exit: ${settling ? 'another exit is chosen before it serves' : 'it moves to another exit'}`, {
      fingerprint,
      address: relay?.address ?? '',
      block: relay?.block ?? '',
      reason: 'egress_conflict',
    });
    if (settling) return { keep: false };
    say.exitGone([id]);
    return { keep: true };
  }

  /** Reads EXIT_LIST again and reacts to the addresses it changed. */
  async refreshList(): Promise<void> {
    const changed = await this.parts.egress.readList([...this.parts.sources.values()].at(-1));
    if (changed.length > 0) this.afterChange(changed, null);
  }

  /** Every EXIT_CATALOG_REFRESH_MS: exits that stay pinned are measured again once their measurement is older than EGRESS_PROBE_TTL; the list is read again when due. */
  tick(): void {
    const { table, egress } = this.parts;
    for (const [id, a] of table.assigned) {
      const route = egress.routeOf(id);
      if (route && egress.due(a.relay.fingerprint)) void this.pinned(id, a.relay.fingerprint, route, false);
    }
    if (egress.listDue() && egress.listReadable()) void this.refreshList();
  }

  /**
   * Exits' addresses changed (a probe, the list): every assignment is read again from the
   * catalog; those on a changed exit get their `distinct` and shortage anew (the others keep
   * theirs: an instance that held a /24 first keeps it, and its fleet lease), and move when
   * they now share a unit while another exit would not (but `settling`, whose caller decides);
   * the fleet re-leases.
   */
  private afterChange(fingerprints: readonly string[], settling: number | null): void {
    const { table, say } = this.parts;
    const changed = new Set(fingerprints);
    const moving: number[] = [];
    table.reread();
    for (const [id, a] of table.assigned) {
      if (!changed.has(a.relay.fingerprint)) continue;
      const shares = table.sharesUnit(id);
      a.distinct = !shares;
      table.noteShortage(id, shares, 'every eligible exit', `measured: it leaves from ${a.relay.address}`);
      if (id !== settling && this.parts.sharesAvoidably(id)) moving.push(id);
    }
    for (const id of moving) {
      const relay = table.assigned.get(id)?.relay;
      if (!relay) continue;
      say.audit(id, `exit ${relay.nickname} of instance ${id} leaves from ${relay.address}, which shares its ${table.unitWord()} with another instance's exit: it moves to another exit`, {
        fingerprint: relay.fingerprint,
        address: relay.address,
        block: relay.block,
        reason: 'egress_conflict',
      });
    }
    say.assignmentsChanged();
    if (moving.length > 0) say.exitGone(moving);
    // An exit found to leave from elsewhere may have freed the /24 it was thought to share.
    this.parts.spread(new Set(settling === null ? moving : [...moving, settling]));
  }
}
