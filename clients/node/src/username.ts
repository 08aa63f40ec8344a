/**
 * The proxy username exitpool reads (docs/api.md, "Session parameters in the username"), in
 * exitpool's own spelling: `<key>[-country-<cc>,…][-ttl-<n>s][-mode-<mode>]`. The key's own
 * dashes are written as `%2D` when parameters follow, so any key reads back as itself.
 */

export type SessionMode = 'sticky' | 'rotating';

export interface SessionChoices {
  /** ISO 3166-1 alpha-2 codes; the exit is in one of them. */
  countries?: readonly string[];
  /** The session's own idle lifetime, in seconds (instead of the service's SESSION_TTL). */
  lifetimeSeconds?: number;
  /** `rotating`: a different exit for every connection, still one session. */
  mode?: SessionMode;
}

/** A choice the service would refuse, caught before any connection is made. */
export class InvalidSessionChoice extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InvalidSessionChoice';
  }
}

export function buildUsername(key: string, choices: SessionChoices = {}): string {
  if (key === '') throw new InvalidSessionChoice('the session key is empty');
  const params: string[] = [];
  if (choices.countries !== undefined && choices.countries.length > 0) {
    const codes = choices.countries.map((c) => c.toLowerCase());
    for (const c of codes) if (!/^[a-z]{2}$/.test(c)) throw new InvalidSessionChoice(`country ${JSON.stringify(c)} is not a two-letter ISO 3166 code`);
    params.push(`country-${[...new Set(codes)].join(',')}`);
  }
  if (choices.lifetimeSeconds !== undefined) {
    if (!Number.isInteger(choices.lifetimeSeconds) || choices.lifetimeSeconds < 1) throw new InvalidSessionChoice('lifetimeSeconds must be a whole number of seconds, at least 1');
    params.push(`ttl-${choices.lifetimeSeconds}s`);
  }
  if (choices.mode !== undefined) {
    // Checked at run time too: JavaScript callers have no type checker.
    if (choices.mode !== 'sticky' && choices.mode !== 'rotating') throw new InvalidSessionChoice('mode is sticky or rotating');
    params.push(`mode-${choices.mode}`);
  }
  if (params.length === 0) {
    // A key with a parameter name between its dashes would read as parameters: said explicitly
    // (the default mode), its dashes escaped, it reads back as itself.
    if (!key.split('-').slice(1).some((piece) => ESCAPED_NAMES.has(piece.toLowerCase()))) return key;
    params.push('mode-sticky');
  }
  return `${encodeURIComponent(key).replace(/-/g, '%2D')}-${params.join('-')}`;
}

/**
 * The names the service reads as parameters, its own and the gateway dialects' (docs/api.md),
 * and the gateway parameters it refuses: a key with any of them between its dashes is escaped.
 * clients/test-vectors/usernames.json lists the same names; the tests hold both to it.
 */
export const PARAMETER_NAMES: readonly string[] = ['country', 'cc', 'sesstime', 'sessionduration', 'ttl', 'mode', 'session', 'sessid'];
export const UNSUPPORTED_PARAMETER_NAMES: readonly string[] = ['city', 'state', 'st', 'zip', 'postalcode', 'continent', 'asn'];
const ESCAPED_NAMES = new Set([...PARAMETER_NAMES, ...UNSUPPORTED_PARAMETER_NAMES]);
