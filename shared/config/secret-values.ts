import { TOKEN_SECRET_BODY_LENGTH } from '../auth/token-format.js';

/**
 * The secrets an operator sets (SIGNING_SECRET, ADMIN_PASSWORD, PROXY_TOKEN, the password in a
 * STATE_STORE Redis URL) are refused at start when they are a documented placeholder or shorter
 * than their minimum: a deployment that forgot to fill one in must not run with a value anyone
 * can read in this repository (docs/security.md, "Known secrets").
 */

/** SIGNING_SECRET: as many characters as the generated secret's base64 (32 random bytes) carries, about. */
export const SIGNING_SECRET_MIN_LENGTH = 32;
/** ADMIN_PASSWORD: a password an operator chose, long enough to resist guessing behind LOGIN_RATE_LIMIT. */
export const ADMIN_PASSWORD_MIN_LENGTH = 12;
/** PROXY_TOKEN: characters after `tp_`, as many as an issued token has (about 131 bits in base62). */
export const PROXY_TOKEN_MIN_LENGTH = TOKEN_SECRET_BODY_LENGTH;
/** The password in a STATE_STORE redis:// URL, when it has one. */
export const REDIS_PASSWORD_MIN_LENGTH = 16;

/**
 * The placeholder every example in this repository uses (deploy/kubernetes/secret.example.yaml,
 * deploy/compose): CHANGE-ME in any case, with `-`, `_`, a space or nothing between the words.
 */
const PLACEHOLDER = /change[-_ ]?me/i;

/** Text of the rule, for the variable table's descriptions (docs/configuration.md). */
export const PLACEHOLDER_RULE = 'A value containing CHANGE-ME (any case; -, _, a space or nothing between the words), the placeholder of the examples in deploy/, is refused.';

/**
 * Throws (a plain Error, as the value parsers do) when `value` is a placeholder or shorter than
 * `minLength` characters. The message follows the variable's name; `subject` names the part of
 * the value it is about (the Redis password of STATE_STORE). The value itself is never repeated.
 */
export function checkSecret(value: string, minLength: number, subject = ''): void {
  const what = subject === '' ? '' : `${subject} `;
  if (PLACEHOLDER.test(value)) {
    throw new Error(`${what}is the placeholder of an example (it contains CHANGE-ME): set a secret of your own (for example: openssl rand -base64 32)`);
  }
  if (value.length < minLength) throw new Error(`${what}must be at least ${minLength} characters, got ${value.length}`);
}

/** The password of a redis:// URL (percent-decoded), or null when it has none. */
export function redisPassword(url: URL): string | null {
  if (url.password === '') return null;
  try {
    return decodeURIComponent(url.password);
  } catch {
    return url.password;
  }
}
