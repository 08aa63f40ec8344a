import { parseIPv4, parseIPv6 } from './ip-literal.js';

/**
 * Destinations that the network refuses by design (not the exit's fault, so never scored): a refusal for
 * one of these says nothing about the health of the instance, so it is never scored.
 * Hostnames other than localhost are not resolved here (domains are never resolved locally).
 */
export function isPrivateDestination(host: string): boolean {
  const v4 = parseIPv4(host);
  if (v4 !== null) return isPrivateIPv4(v4, 0);
  const v6 = parseIPv6(host);
  if (v6 !== null) return isPrivateIPv6(v6);
  return isLocalhostName(host);
}

export function isPrivateIPv4(b: Uint8Array, offset: number): boolean {
  const a = b[offset]!;
  const second = b[offset + 1]!;
  if (a === 0 || a === 10 || a === 127) return true;
  if (a === 172 && (second & 0xf0) === 16) return true;
  if (a === 192 && second === 168) return true;
  if (a === 169 && second === 254) return true;
  if (a === 100 && (second & 0xc0) === 64) return true;
  return false;
}

export function isPrivateIPv6(b: Uint8Array): boolean {
  let allZeroBeforeLast = true;
  for (let i = 0; i < 15; i++) {
    if (b[i] !== 0) {
      allZeroBeforeLast = false;
      break;
    }
  }
  // ::1 loopback and :: unspecified
  if (allZeroBeforeLast && (b[15] === 1 || b[15] === 0)) return true;
  if ((b[0]! & 0xfe) === 0xfc) return true; // fc00::/7 unique local
  if (b[0] === 0xfe && (b[1]! & 0xc0) === 0x80) return true; // fe80::/10 link local
  if (isIPv4Mapped(b)) return isPrivateIPv4(b, 12);
  return false;
}

function isIPv4Mapped(b: Uint8Array): boolean {
  for (let i = 0; i < 10; i++) if (b[i] !== 0) return false;
  return b[10] === 0xff && b[11] === 0xff;
}

function isLocalhostName(host: string): boolean {
  const name = (host.endsWith('.') ? host.slice(0, -1) : host).toLowerCase();
  // RFC 6761 reserves the whole .localhost tree for loopback.
  return name === 'localhost' || name.endsWith('.localhost');
}
