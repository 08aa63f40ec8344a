import { normaliseAddress } from './egress-answer.js';

/** One address an exit's traffic was seen leaving from, and when. */
export interface ListedAddress {
  readonly address: string;
  /** ms since the epoch. */
  readonly at: number;
}

/** What a Tor exit list says of one relay: the addresses seen, oldest first. */
export interface ExitListEntry {
  readonly fingerprint: string;
  readonly addresses: readonly ListedAddress[];
}

/** Relays read from one list at most: the public list has about 2,000; past it the rest is left out. */
export const MAX_EXIT_LIST_ENTRIES = 20_000;
/** Addresses kept per relay (the newest): a relay seen from more is rotating addresses anyway. */
export const MAX_ADDRESSES_PER_EXIT = 8;
/** The largest list read (bytes): the public one is well under 1 MiB. */
export const MAX_EXIT_LIST_BYTES = 8 * 1024 * 1024;

/** The result of reading a list: its entries, and how many lines were not understood. */
export interface ExitList {
  readonly entries: ReadonlyMap<string, ExitListEntry>;
  readonly skippedLines: number;
}

/**
 * Reads a Tor exit list in the bulk `exit-addresses` format the Tor Project publishes
 * (check.torproject.org/exit-addresses, written by TorDNSEL):
 *
 * ```
 * ExitNode 0011BD2485AD45D984EC4159C88FC066E5E3300E
 * Published 2024-05-01 12:04:11
 * LastStatus 2024-05-01 13:00:00
 * ExitAddress 162.247.74.201 2024-05-01 13:05:12
 * ```
 *
 * Every `ExitAddress` belongs to the `ExitNode` above it; times are UTC. Lines it does not know
 * are skipped (the format may grow), and so is a malformed line (counted), without losing the
 * rest: a list is a hint the probe confirms, never a reason to fail. Bounded by
 * MAX_EXIT_LIST_ENTRIES and MAX_ADDRESSES_PER_EXIT.
 */
export function parseExitList(text: string): ExitList {
  const entries = new Map<string, ListedAddress[]>();
  let current: ListedAddress[] | undefined;
  let skippedLines = 0;
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('@')) continue; // blank, or an annotation (@type exit-list 1.0)
    const [keyword, ...args] = line.split(/\s+/);
    if (keyword === 'ExitNode') {
      const fingerprint = args.length === 1 ? (args[0] ?? '').toUpperCase() : '';
      if (!/^[0-9A-F]{40}$/.test(fingerprint)) {
        skippedLines++;
        current = undefined;
        continue;
      }
      current = entries.get(fingerprint);
      if (current === undefined && entries.size < MAX_EXIT_LIST_ENTRIES) {
        current = [];
        entries.set(fingerprint, current);
      }
    } else if (keyword === 'ExitAddress') {
      const address = args.length === 3 ? normaliseAddress(args[0] ?? '') : undefined;
      const at = parseListTime(args[1], args[2]);
      if (address === undefined || at === undefined || current === undefined) {
        skippedLines++;
        continue;
      }
      const seenBefore = current.findIndex((a) => a.address === address);
      if (seenBefore >= 0) current[seenBefore] = { address, at: Math.max(at, current[seenBefore]?.at ?? at) };
      else current.push({ address, at });
    }
  }
  const out = new Map<string, ExitListEntry>();
  for (const [fingerprint, addresses] of entries) {
    if (addresses.length === 0) continue;
    const newestLast = [...addresses].sort((a, b) => a.at - b.at).slice(-MAX_ADDRESSES_PER_EXIT);
    out.set(fingerprint, { fingerprint, addresses: newestLast });
  }
  return { entries: out, skippedLines };
}

/** `YYYY-MM-DD HH:MM:SS` (UTC) in ms since the epoch; undefined when it is not one. */
export function parseListTime(date: string | undefined, time: string | undefined): number | undefined {
  const d = /^(\d{4})-(\d{2})-(\d{2})$/.exec(date ?? '');
  const t = /^(\d{2}):(\d{2}):(\d{2})$/.exec(time ?? '');
  if (!d || !t) return undefined;
  const [year, month, day, hour, minute, second] = [...d.slice(1), ...t.slice(1)].map(Number) as [number, number, number, number, number, number];
  const ms = Date.UTC(year, month - 1, day, hour, minute, second);
  const back = new Date(ms);
  // Date.UTC rolls 2024-02-30 over into March: a date that does not exist is no date.
  if (back.getUTCFullYear() !== year || back.getUTCMonth() !== month - 1 || back.getUTCDate() !== day || hour > 23 || minute > 59 || second > 59) return undefined;
  return ms;
}
