import { hash } from 'node:crypto';

/** Every token secret starts with this; it is the only thing checked before the digest lookup. */
export const TOKEN_PREFIX = 'tp_';
/** Base62 characters after the prefix in a newly issued secret: 22 × log2(62) ≈ 131 bits. */
export const TOKEN_SECRET_BODY_LENGTH = 22;
/** The shape of secrets issued now. Older secrets may also contain `-` and `_` and still verify. */
export const ISSUED_TOKEN_SECRET_PATTERN = /^tp_[A-Za-z0-9]{22}$/;
/**
 * Longest secret worth hashing. PROXY_TOKEN allows 128 characters after the prefix; anything
 * longer cannot match a stored digest, so it is refused before spending a hash on it.
 */
export const MAX_TOKEN_SECRET_LENGTH = 256;

/** Only the prefix is checked on the way in (tokens of other formats stay valid), plus a length bound. */
export function hasTokenPrefix(text: string): boolean {
  return text.length <= MAX_TOKEN_SECRET_LENGTH && text.startsWith(TOKEN_PREFIX);
}

/**
 * What auth.json and the snapshots keep instead of a secret, and what a worker looks a presented
 * secret up by. A plain SHA-256 is enough: issued secrets carry about 131 random bits, so there
 * is nothing for a slow hash to protect. One-shot (`crypto.hash`): it runs for every proxied
 * connection, and skipping the Hash object makes it about 6 times cheaper for a token.
 */
export function digestTokenSecret(secret: string): string {
  return hash('sha256', secret, 'hex');
}
