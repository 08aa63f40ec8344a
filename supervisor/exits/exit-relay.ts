import { isIPv6 } from 'node:net';

/** One usable exit relay of the consensus, as the pool manages it. */
export interface ExitRelay {
  readonly fingerprint: string;
  readonly nickname: string;
  /** The OR address from the consensus (traffic may leave from another address: see exit_ip). */
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
