import { isIPv6 } from 'node:net';

/** One usable exit relay as the consensus publishes it: its OR address, and that address's country. */
export interface PublishedExit {
  readonly fingerprint: string;
  readonly nickname: string;
  /** The OR address from the consensus. */
  readonly address: string;
  /** Lower-case ISO 3166 code from tor's GeoIP database; '' when unknown. */
  readonly country: string;
  /** Consensus weight (`w Bandwidth=`), at least 1: the choice among eligible exits is weighted by it. */
  readonly bandwidth: number;
  /** The address block: the /24 of an IPv4 address, the /48 of an IPv6 one. */
  readonly block: string;
  /**
   * The relay's family: the smallest fingerprint among the relays that declare each other
   * (mutual `family` entries, or a shared family id); its own fingerprint when it has none.
   */
  readonly family: string;
}

/**
 * Where an exit's address comes from: measured through it (`probe`), read from a Tor exit list
 * (`exit_list`), or the OR address it publishes, while neither says otherwise (`published`).
 */
export type AddressSource = 'probe' | 'exit_list' | 'published';

/**
 * One usable exit relay of the consensus, as the pool manages it: judged by the address sites
 * see. `address`, `block` and `country` are those of the address its traffic leaves from (the
 * newest measurement or exit list entry; the published address until one says otherwise), so
 * distinctness, /24 blocks, bans and countries are reckoned on it.
 */
export interface ExitRelay extends PublishedExit {
  /** The OR address the consensus publishes (equal to `address` for most exits). */
  readonly published: string;
  readonly addressSource: AddressSource;
  /** When `address` was seen (ms since the epoch): the probe's time, or the exit list's; null for the published address. */
  readonly measuredAt: number | null;
  /** Every address its traffic was seen leaving from (probes, the exit list), oldest first; empty before any was. */
  readonly seen: readonly string[];
}

/** An exit known only from the consensus: its address is the published one. */
export function asPublished(exit: PublishedExit, seen: readonly string[] = []): ExitRelay {
  return { ...exit, published: exit.address, addressSource: 'published', measuredAt: null, seen };
}

/**
 * What two instances must not share (EXIT_DISTINCT). The units nest: `subnet` also keeps relays
 * apart, and `family` keeps relays, /24s and families apart.
 */
export type DistinctUnit = 'relay' | 'subnet' | 'family';
export const DISTINCT_UNITS: readonly DistinctUnit[] = ['relay', 'subnet', 'family'];

/** The keys by which `relay` conflicts with another under `unit`. */
export function distinctKeys(relay: Pick<ExitRelay, 'fingerprint' | 'block' | 'family'>, unit: DistinctUnit): string[] {
  const keys = [`relay:${relay.fingerprint}`];
  if (unit !== 'relay') keys.push(`block:${relay.block}`);
  if (unit === 'family') keys.push(`family:${relay.family}`);
  return keys;
}

/** The /24 (IPv4) or /48 (IPv6) an address belongs to, written as its prefix. */
export function addressBlock(address: string): string {
  if (isIPv6(address)) {
    const groups = expandIpv6(address).slice(0, 3);
    return `${groups.join(':')}::/48`;
  }
  const octets = address.split('.');
  if (octets.length !== 4) return address;
  return `${octets.slice(0, 3).join('.')}.0/24`;
}

function expandIpv6(address: string): string[] {
  const [head = '', tail = ''] = address.split('::');
  const left = head === '' ? [] : head.split(':');
  const right = tail === '' ? [] : tail.split(':');
  const missing = address.includes('::') ? 8 - left.length - right.length : 0;
  return [...left, ...Array<string>(missing).fill('0'), ...right].map((g) => g.toLowerCase().replace(/^0+(?=.)/, ''));
}
