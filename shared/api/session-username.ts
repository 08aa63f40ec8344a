/**
 * Per-session choices carried in the proxy username (SOCKS5 username, or the user of the HTTP
 * proxy's Proxy-Authorization), in the convention scraping code already speaks:
 *
 *   <key>[-session-<id>][-country-<cc>[,<cc>…]][-sesstime-<minutes>][-ttl-<duration>][-mode-<sticky|rotating>]
 *
 * Parameters are read from the end: the username is split on `-`, and while its last two
 * pieces are a parameter name and a value, they are one parameter. What is left is the session
 * key, which may contain `-` itself (`shop-eu-1-country-de` is key `shop-eu-1`). A username
 * with no parameter is a plain key, exactly as before. In a username with parameters the key is
 * percent-decoded, so a key whose own end looks like a parameter is written with its dashes as
 * `%2D` (`my%2Dcountry%2Dde-mode-sticky` is key `my-country-de`). Each parameter may appear once.
 * `session-<id>` is part of the key wherever it stands (`u-country-de-session-7` and
 * `u-session-7-country-de` are both key `u-session-7`). A parameter recognised further in (a
 * `country`, or `sesstime`, `ttl` or `mode` with a value that fits it) that is not followed by
 * parameters to the end is refused: what follows it is a typo or another gateway's parameter,
 * and reading the whole as a plain key would silently drop what was asked for. A name whose
 * value does not fit (`dark-mode-test`), and `session-<id>`, stay part of a plain key.
 *
 * docs/api.md, "Session parameters in the username", is the user's version of this.
 */

export const SESSION_MODES = ['sticky', 'rotating'] as const;
export type SessionMode = (typeof SESSION_MODES)[number];

/** What a session asked for; absent fields keep the service's defaults. */
export interface SessionParams {
  /** Lower-case ISO 3166-1 alpha-2 codes, in the order given, without repeats. */
  countries?: string[];
  /** Idle lifetime overriding SESSION_TTL for this session. */
  lifetimeMs?: number;
  mode?: SessionMode;
}

export interface ParsedUsername {
  key: string;
  params: SessionParams;
}

/** At most this many countries in one `country-` list. */
export const MAX_SESSION_COUNTRIES = 8;
const PARAMETER_NAMES = ['country', 'sesstime', 'ttl', 'mode', 'session'] as const;
type ParameterName = (typeof PARAMETER_NAMES)[number];

/** A username whose parameters cannot be honoured as written: the connection is refused. */
export class SessionUsernameError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SessionUsernameError';
  }
}

const COUNTRY = /^[a-z]{2}$/;
const VALUE = /^[A-Za-z0-9,.]+$/;
const DURATION = /^(\d{1,9})(s|m|h|d)?$/;
const UNIT_MS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

function parseCountries(value: string): string[] {
  const codes = value.toLowerCase().split(',');
  if (codes.length > MAX_SESSION_COUNTRIES) throw new SessionUsernameError(`country: at most ${MAX_SESSION_COUNTRIES} codes`);
  for (const c of codes) if (!COUNTRY.test(c)) throw new SessionUsernameError(`country: "${c.slice(0, 16)}" is not a two-letter ISO 3166 code`);
  return [...new Set(codes)];
}

function parseLifetime(name: 'sesstime' | 'ttl', value: string): number {
  if (name === 'sesstime') {
    if (!/^\d{1,7}$/.test(value) || Number(value) === 0) throw new SessionUsernameError('sesstime: whole minutes, at least 1');
    return Number(value) * 60_000;
  }
  const m = DURATION.exec(value);
  if (!m || Number(m[1]) === 0) throw new SessionUsernameError('ttl: a duration such as 90s, 30m, 2h or 1d');
  return Number(m[1]) * (UNIT_MS[m[2] ?? 's'] as number);
}

/** Whether `<name>-<value>` met inside what would otherwise be the key is a parameter the client meant. */
function recognisedInKey(name: string, value: string): boolean {
  switch (name) {
    case 'country':
      return true;
    case 'sesstime':
      return /^\d{1,7}$/.test(value);
    case 'ttl':
      return DURATION.test(value);
    case 'mode':
      return (SESSION_MODES as readonly string[]).includes(value.toLowerCase());
    default:
      return false;
  }
}

function decodeKey(raw: string): string {
  let key: string;
  try {
    key = decodeURIComponent(raw);
  } catch {
    throw new SessionUsernameError('the key has a malformed %-escape');
  }
  if (key === '') throw new SessionUsernameError('the key before the parameters is empty');
  return key;
}

/**
 * Splits a proxy username into its session key and parameters. Throws SessionUsernameError for
 * a parameter that is malformed or repeated; a username without parameters is returned as it is.
 */
export function parseSessionUsername(username: string): ParsedUsername {
  const pieces = username.split('-');
  const found = new Map<ParameterName, string>();
  while (pieces.length >= 3) {
    const name = pieces[pieces.length - 2] as string;
    const value = pieces[pieces.length - 1] as string;
    if (!(PARAMETER_NAMES as readonly string[]).includes(name.toLowerCase())) break;
    const param = name.toLowerCase() as ParameterName;
    if (!VALUE.test(value)) throw new SessionUsernameError(`${param}: malformed value`);
    if (found.has(param)) throw new SessionUsernameError(`${param} is given twice`);
    found.set(param, value);
    pieces.length -= 2;
  }
  // A parameter recognised further in, not followed through to the end by parameters: what
  // follows it is a typo or another gateway's parameter, and reading the whole as a plain key
  // would silently drop the country, lifetime or mode asked for. Only a name with a value that
  // fits it counts (`dark-mode-test` and `session-7-x` stay plain keys), except `country`, whose
  // loss would send a session out of any country.
  for (let i = 1; i < pieces.length - 1; i++) {
    const name = (pieces[i] as string).toLowerCase();
    const value = pieces[i + 1] as string;
    if (!recognisedInKey(name, value)) continue;
    let j = i + 2;
    while (j + 1 < pieces.length && (PARAMETER_NAMES as readonly string[]).includes((pieces[j] as string).toLowerCase()) && VALUE.test(pieces[j + 1] as string)) j += 2;
    const after = pieces[j] ?? '';
    throw new SessionUsernameError(`"${after.slice(0, 16)}" after ${name}-${value.slice(0, 24)} is not a parameter (known: ${PARAMETER_NAMES.join(', ')}); write a dash of the key as %2D`);
  }
  if (found.size === 0) return { key: username, params: {} };
  if (found.has('sesstime') && found.has('ttl')) throw new SessionUsernameError('sesstime and ttl both set the lifetime: give one');
  const params: SessionParams = {};
  const country = found.get('country');
  if (country !== undefined) params.countries = parseCountries(country);
  const sesstime = found.get('sesstime');
  const ttl = found.get('ttl');
  if (sesstime !== undefined) params.lifetimeMs = parseLifetime('sesstime', sesstime);
  else if (ttl !== undefined) params.lifetimeMs = parseLifetime('ttl', ttl);
  const mode = found.get('mode');
  if (mode !== undefined) {
    const m = mode.toLowerCase();
    if (!(SESSION_MODES as readonly string[]).includes(m)) throw new SessionUsernameError(`mode: sticky or rotating, not "${mode.slice(0, 16)}"`);
    params.mode = m as SessionMode;
  }
  // `session-<id>` (the commercial gateways' own spelling) stays part of the key, wherever it was written.
  const session = found.get('session');
  const base = decodeKey(pieces.join('-'));
  return { key: session === undefined ? base : `${base}-session-${session}`, params };
}

/** The parameters in one canonical text: equal for two usernames that ask for the same. */
export function sessionParamsTag(p: SessionParams): string {
  return `${p.countries?.join(',') ?? ''}|${p.lifetimeMs ?? ''}|${p.mode ?? ''}`;
}
