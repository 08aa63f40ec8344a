/**
 * The proxy username exitpool reads (docs/api.md, "Session parameters in the username"):
 * `<key>[-country-<cc>,…][-ttl-<duration>][-mode-rotating]`. The key's own dashes are written as
 * `%2D` when parameters follow, so any key reads back as itself.
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
  if (choices.mode !== undefined) params.push(`mode-${choices.mode}`);
  if (params.length === 0) {
    // A key with a parameter name between its dashes would read as parameters: said explicitly
    // (the default mode), its dashes escaped, it reads back as itself.
    if (!key.split('-').slice(1).some((piece) => PARAMETER_NAMES.includes(piece.toLowerCase()))) return key;
    params.push('mode-sticky');
  }
  return `${encodeURIComponent(key).replace(/-/g, '%2D')}-${params.join('-')}`;
}

/** The names the service reads as parameters (docs/api.md). */
const PARAMETER_NAMES = ['country', 'sesstime', 'ttl', 'mode', 'session'];
