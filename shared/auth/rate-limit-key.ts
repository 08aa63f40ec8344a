import { isIPv4, isIPv6 } from 'node:net';

/** Longest key kept for an address that is not an IP literal (should not happen; bounds memory). */
const MAX_OPAQUE_KEY_LENGTH = 64;

/**
 * The bucket a client address is counted in by the login rate limiter. IPv4 counts per address
 * (an IPv4-mapped IPv6 address counts as its IPv4 address); IPv6 counts per /64, because one
 * IPv6 host usually holds a whole /64 and could otherwise step to a fresh address per attempt.
 */
export function rateLimitKey(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped !== null && isIPv4(mapped[1]!)) return mapped[1]!;
  if (isIPv4(address)) return address;
  const withoutZone = address.split('%')[0]!;
  if (isIPv6(withoutZone)) {
    const hextets = expandIpv6(withoutZone);
    return `${hextets.slice(0, 4).map((h) => h.toString(16)).join(':')}::/64`;
  }
  return address.slice(0, MAX_OPAQUE_KEY_LENGTH);
}

/** The eight 16-bit groups of an address already known to be valid IPv6. */
function expandIpv6(address: string): number[] {
  const groups = (part: string): number[] => {
    if (part === '') return [];
    const out: number[] = [];
    for (const piece of part.split(':')) {
      if (piece.includes('.')) {
        const [a, b, c, d] = piece.split('.').map(Number) as [number, number, number, number];
        out.push((a << 8) | b, (c << 8) | d);
      } else {
        out.push(parseInt(piece, 16));
      }
    }
    return out;
  };
  const gap = address.indexOf('::');
  if (gap < 0) return groups(address);
  const head = groups(address.slice(0, gap));
  const tail = groups(address.slice(gap + 2));
  return [...head, ...new Array<number>(8 - head.length - tail.length).fill(0), ...tail];
}
