import { TOKEN_PREFIX, TOKEN_SECRET_BODY_LENGTH } from '../../shared/auth/token-format.js';
import { randomBase62 } from './random-base62.js';

/** Length of a token id (base62): 10 characters, ~59 bits, so ids never need to be coordinated. */
export const TOKEN_ID_LENGTH = 10;
/** Length of a generated dashboard password (base62): ~119 bits, still easy to copy from a log. */
export const GENERATED_PASSWORD_LENGTH = 20;

export function generateTokenSecret(): string {
  return TOKEN_PREFIX + randomBase62(TOKEN_SECRET_BODY_LENGTH);
}

/** A fresh id that is not in `taken`. */
export function generateTokenId(taken: ReadonlySet<string>): string {
  for (;;) {
    const id = randomBase62(TOKEN_ID_LENGTH);
    if (!taken.has(id)) return id;
  }
}

export function generateAdminPassword(): string {
  return randomBase62(GENERATED_PASSWORD_LENGTH);
}
