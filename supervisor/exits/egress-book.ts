import type { ExitList } from './exit-list.js';
import { MAX_ADDRESSES_PER_EXIT } from './exit-list.js';

/** The address an exit's traffic was last seen leaving from, by what, and when. */
export interface EgressObservation {
  readonly address: string;
  readonly source: 'probe' | 'exit_list';
  /** ms since the epoch. */
  readonly at: number;
}

/**
 * What is known of the addresses exits send their traffic from: the last probe through each
 * (EGRESS_PROBE_URLS), the last exit list read (EXIT_LIST), and every address seen. The newest
 * observation wins, whichever its source: an exit list entry newer than the last probe (the exit
 * moved since) is believed until the next probe. Bounded: probes and seen addresses only for
 * relays of the catalog (`keepOnly`), at most MAX_ADDRESSES_PER_EXIT seen addresses each; the
 * list as read (MAX_EXIT_LIST_ENTRIES).
 */
export class EgressBook {
  private readonly probes = new Map<string, { address: string; at: number }>();
  private list: ExitList['entries'] = new Map();
  private readonly seenBy = new Map<string, string[]>();
  /** When the last probe through an exit failed, so it is not tried again before EGRESS_PROBE_RETRY_MS. */
  private readonly failures = new Map<string, number>();

  /** A probe through `fingerprint` saw `address`. Returns whether that address is new for the exit. */
  recordProbe(fingerprint: string, address: string, at: number): boolean {
    this.probes.set(fingerprint, { address, at });
    this.failures.delete(fingerprint);
    return this.see(fingerprint, address);
  }

  recordFailure(fingerprint: string, at: number): void {
    this.failures.set(fingerprint, at);
  }

  /** When the last probe through the exit failed (none answered since); undefined when none did. */
  failedAt(fingerprint: string): number | undefined {
    return this.failures.get(fingerprint);
  }

  /** When the exit was last measured by a probe; undefined when never. */
  probedAt(fingerprint: string): number | undefined {
    return this.probes.get(fingerprint)?.at;
  }

  /** Replaces what the previous exit list said; its addresses join every relay's seen ones. */
  replaceList(list: ExitList): void {
    this.list = list.entries;
    for (const entry of list.entries.values()) for (const a of entry.addresses) this.see(entry.fingerprint, a.address);
  }

  /** The newest observation of the exit's address; undefined when neither a probe nor the list has one. */
  current(fingerprint: string): EgressObservation | undefined {
    const probed = this.probes.get(fingerprint);
    const listed = this.list.get(fingerprint)?.addresses.at(-1);
    if (listed && (!probed || listed.at > probed.at)) return { address: listed.address, source: 'exit_list', at: listed.at };
    return probed ? { address: probed.address, source: 'probe', at: probed.at } : undefined;
  }

  /** Every address the exit's traffic was seen leaving from, oldest first. */
  seen(fingerprint: string): readonly string[] {
    return this.seenBy.get(fingerprint) ?? [];
  }

  /** Addresses observed for exits of `fingerprints` (so their countries can be looked up). */
  addressesOf(fingerprints: Iterable<string>): Set<string> {
    const out = new Set<string>();
    for (const fp of fingerprints) for (const a of this.seen(fp)) out.add(a);
    return out;
  }

  /** Forgets probes, failures and seen addresses of relays no longer in the catalog (the list is kept whole). */
  keepOnly(fingerprints: ReadonlySet<string>): void {
    for (const map of [this.probes, this.seenBy, this.failures]) for (const fp of [...map.keys()]) if (!fingerprints.has(fp)) map.delete(fp);
  }

  /** Relays with a probe measurement (diagnostics). */
  get probedCount(): number {
    return this.probes.size;
  }

  private see(fingerprint: string, address: string): boolean {
    const seen = this.seenBy.get(fingerprint) ?? [];
    const known = seen.includes(address);
    const next = [...seen.filter((a) => a !== address), address].slice(-MAX_ADDRESSES_PER_EXIT);
    this.seenBy.set(fingerprint, next);
    return !known;
  }
}
