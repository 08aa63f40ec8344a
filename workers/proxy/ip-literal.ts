/**
 * Textual IP literals <-> bytes, strict: SOCKS5 carries addresses as bytes, HTTP carries them
 * as text, and private-destination checks need the bytes of either.
 */

const IPV4_OCTET = /^(?:0|[1-9]\d{0,2})$/;
const HEX_GROUP = /^[0-9a-fA-F]{1,4}$/;

/** Dotted-decimal IPv4 without leading zeros (so "010.0.0.1" is not mistaken for an address). */
export function parseIPv4(text: string): Uint8Array | null {
  const parts = text.split('.');
  if (parts.length !== 4) return null;
  const out = new Uint8Array(4);
  for (let i = 0; i < 4; i++) {
    const part = parts[i]!;
    if (!IPV4_OCTET.test(part)) return null;
    const n = Number(part);
    if (n > 255) return null;
    out[i] = n;
  }
  return out;
}

/** RFC 4291 text forms, including "::" and a trailing dotted IPv4; zone identifiers are refused. */
export function parseIPv6(text: string): Uint8Array | null {
  if (text.length < 2 || text.length > 45) return null;
  const doubleColon = text.indexOf('::');
  if (doubleColon !== -1 && text.indexOf('::', doubleColon + 1) !== -1) return null;
  const head = doubleColon === -1 ? text : text.slice(0, doubleColon);
  const tail = doubleColon === -1 ? '' : text.slice(doubleColon + 2);
  const headGroups = head === '' ? [] : head.split(':');
  const tailGroups = tail === '' ? [] : tail.split(':');
  const words: number[] = [];
  const tailWords: number[] = [];
  if (!collectWords(headGroups, words, doubleColon === -1)) return null;
  if (!collectWords(tailGroups, tailWords, true)) return null;
  const total = words.length + tailWords.length;
  if (doubleColon === -1) {
    if (total !== 8) return null;
  } else if (total > 7) {
    return null;
  }
  const out = new Uint8Array(16);
  for (let i = 0; i < words.length; i++) writeWord(out, i, words[i]!);
  const tailStart = 8 - tailWords.length;
  for (let i = 0; i < tailWords.length; i++) writeWord(out, tailStart + i, tailWords[i]!);
  return out;
}

function collectWords(groups: string[], into: number[], ipv4AllowedLast: boolean): boolean {
  for (let i = 0; i < groups.length; i++) {
    const group = groups[i]!;
    if (HEX_GROUP.test(group)) {
      into.push(parseInt(group, 16));
      continue;
    }
    if (ipv4AllowedLast && i === groups.length - 1 && group.includes('.')) {
      const v4 = parseIPv4(group);
      if (v4 === null) return false;
      into.push((v4[0]! << 8) | v4[1]!, (v4[2]! << 8) | v4[3]!);
      continue;
    }
    return false;
  }
  return true;
}

function writeWord(out: Uint8Array, index: number, word: number): void {
  out[index * 2] = word >>> 8;
  out[index * 2 + 1] = word & 0xff;
}

export function formatIPv4(bytes: Uint8Array, offset = 0): string {
  return `${bytes[offset]}.${bytes[offset + 1]}.${bytes[offset + 2]}.${bytes[offset + 3]}`;
}

/** RFC 5952 canonical form: lower case, longest run (>= 2) of zero groups compressed, leftmost on a tie. */
export function formatIPv6(bytes: Uint8Array, offset = 0): string {
  const words = new Array<number>(8);
  for (let i = 0; i < 8; i++) words[i] = (bytes[offset + i * 2]! << 8) | bytes[offset + i * 2 + 1]!;
  let bestStart = -1;
  let bestLength = 0;
  for (let i = 0; i < 8; ) {
    if (words[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && words[j] === 0) j++;
    if (j - i > bestLength && j - i >= 2) {
      bestStart = i;
      bestLength = j - i;
    }
    i = j;
  }
  if (bestStart === -1) return words.map((w) => w.toString(16)).join(':');
  const left = words.slice(0, bestStart).map((w) => w.toString(16)).join(':');
  const right = words.slice(bestStart + bestLength).map((w) => w.toString(16)).join(':');
  return `${left}::${right}`;
}
