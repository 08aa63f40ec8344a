import type { ExitRelay } from './exit-relay.js';

/**
 * Whether a relay matches a TOR_EXIT_NODES list (already normalised by supervisor/tor/node-list.ts):
 * `{cc}` country, `$FP` (optionally `~nick`), nickname (case-insensitive, as tor compares them),
 * IPv4 address or CIDR block. The supervisor applies the list itself when it assigns exits, so
 * the pin it sets (`ExitNodes=$fp`) never contradicts the operator's selection.
 */
export function matchesNodeList(relay: ExitRelay, nodes: readonly string[]): boolean {
  return nodes.some((node) => matchesSelector(relay, node));
}

function matchesSelector(relay: ExitRelay, node: string): boolean {
  if (node.startsWith('{')) return relay.country !== '' && node.slice(1, -1).toLowerCase() === relay.country;
  if (node.startsWith('$')) {
    const [fp, nick] = node.slice(1).split(/[~=]/);
    return fp?.toUpperCase() === relay.fingerprint && (nick === undefined || nick.toLowerCase() === relay.nickname.toLowerCase());
  }
  if (/^\d/.test(node)) return inCidr(relay.address, node);
  return node.toLowerCase() === relay.nickname.toLowerCase();
}

function inCidr(address: string, cidr: string): boolean {
  const [base = '', maskText] = cidr.split('/');
  const a = ipv4(address);
  const b = ipv4(base);
  if (a === undefined || b === undefined) return false;
  const mask = maskText === undefined ? 32 : Number(maskText);
  if (mask === 0) return true;
  const shift = 32 - mask;
  return a >>> shift === b >>> shift;
}

function ipv4(address: string): number | undefined {
  const parts = address.split('.');
  if (parts.length !== 4) return undefined;
  let n = 0;
  for (const p of parts) {
    const v = Number(p);
    if (!/^\d{1,3}$/.test(p) || v > 255) return undefined;
    n = n * 256 + v;
  }
  return n;
}
