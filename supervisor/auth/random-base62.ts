import { randomBytes } from 'node:crypto';

export const BASE62_ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
// The largest multiple of 62 that fits in a byte. Bytes at or above it are thrown away so that
// `byte % 62` is uniform (no modulo bias towards the first 256 - 248 = 8 characters).
const ACCEPT_BELOW = 248;

export type RandomSource = (size: number) => Buffer;

/** `length` characters drawn uniformly from [0-9A-Za-z] with a CSPRNG, by rejection sampling. */
export function randomBase62(length: number, random: RandomSource = randomBytes): string {
  let out = '';
  while (out.length < length) {
    // ~3% of bytes are rejected; ask for a little more than needed to usually finish in one draw.
    const bytes = random(Math.ceil((length - out.length) * 1.1) + 4);
    for (const byte of bytes) {
      if (byte >= ACCEPT_BELOW) continue;
      out += BASE62_ALPHABET[byte % 62];
      if (out.length === length) break;
    }
  }
  return out;
}
