/**
 * Per-session choices carried in the proxy username (SOCKS5 username, or the user of the HTTP
 * proxy's Proxy-Authorization), in the conventions scraping code already speaks:
 *
 *   <key>[-session-<id>|-sessid-<id>][-country-<cc>[,<cc>…]|-cc-<cc>]
 *        [-sesstime-<minutes>|-sessionduration-<minutes>|-ttl-<duration>][-mode-<sticky|rotating>]
 *
 * exitpool's own names (`country`, `sesstime`, `ttl`, `mode`, `session`) and the two dialects
 * gateway scrapers are written for: Oxylabs' (`cc`, `sessid`, `sesstime`) and Decodo's
 * (`country`, `session`, `sessionduration`), so code written for either works by changing only
 * host and password (`customer-acme-cc-DE-sessid-abc-sesstime-10` is key `customer-acme-sessid-abc`
 * in Germany for 10 idle minutes).
 *
 * Parameters are read from the end: the username is split on `-`, and while its last two
 * pieces are a parameter name and a value, they are one parameter. What is left is the session
 * key, which may contain `-` itself (`shop-eu-1-country-de` is key `shop-eu-1`). A username
 * with no parameter is a plain key, exactly as before. In a username with parameters the key is
 * percent-decoded, so a key whose own end looks like a parameter is written with its dashes as
 * `%2D` (`my%2Dcountry%2Dde-mode-sticky` is key `my-country-de`). Each parameter may appear once
 * (an alias counts as its parameter: `country` and `cc` are one). `session-<id>` and
 * `sessid-<id>` are part of the key wherever they stand (`u-country-de-session-7` and
 * `u-session-7-country-de` are both key `u-session-7`).
 *
 * Nothing asked for is dropped in silence: a targeting parameter the gateways offer and
 * exitpool cannot honour (`city`, `state`, `st`, `zip`, `postalcode`, `continent`, `asn`:
 * UNSUPPORTED_PARAMETER_NAMES) is refused wherever it stands, and a parameter recognised further
 * in (a `country`, or a `cc`, `sesstime`, `sessionduration`, `ttl` or `mode` with a value that
 * fits it) that is not followed by parameters to the end is refused too: what follows it is a
 * typo or another gateway's parameter. A name whose value does not fit (`dark-mode-test`), and
 * `session-<id>`, stay part of a plain key.
 *
 * docs/api.md, "Session parameters in the username", is the user's version of this;
 * clients/test-vectors/usernames.json holds the cases the service and both clients are tested on.
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

/** Each name the grammar reads, and the parameter it sets (an alias shares its parameter's slot). */
const PARAMETER_OF = {
  country: 'country',
  cc: 'country',
  sesstime: 'lifetime',
  sessionduration: 'lifetime',
  ttl: 'lifetime',
  mode: 'mode',
  session: 'session',
  sessid: 'session',
} as const;
type ParameterName = keyof typeof PARAMETER_OF;
type Parameter = (typeof PARAMETER_OF)[ParameterName];

/** The names read as parameters, exitpool's own and the dialects' (docs/api.md). */
export const PARAMETER_NAMES = Object.keys(PARAMETER_OF) as readonly ParameterName[];

/**
 * The gateways' targeting parameters exitpool cannot honour, each with the value shape that
 * makes `<name>-<value>` that parameter: refused rather than taken into the key, which would
 * send the session out of the city, state or network asked for.
 */
const UNSUPPORTED_VALUE: Readonly<Record<string, RegExp>> = {
  city: /^[A-Za-z0-9_.]+$/,
  state: /^[A-Za-z0-9_.]+$/,
  // Oxylabs' US states: st-us_california.
  st: /^[A-Za-z]{2}_[A-Za-z_]+$/,
  zip: /^[A-Za-z0-9]{3,10}$/,
  postalcode: /^[A-Za-z0-9]{3,10}$/,
  continent: /^[A-Za-z]{2}$/,
  asn: /^\d{1,10}$/,
};
export const UNSUPPORTED_PARAMETER_NAMES = Object.keys(UNSUPPORTED_VALUE);

/** A username whose parameters cannot be honoured as written: the connection is refused. */
export class SessionUsernameError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SessionUsernameError';
  }
}

const COUNTRY = /^[a-z]{2}$/;
const COUNTRY_LIST = /^[A-Za-z]{2}(,[A-Za-z]{2})*$/;
const MINUTES = /^\d{1,7}$/;
const VALUE = /^[A-Za-z0-9,.]+$/;
const DURATION = /^(\d{1,9})(s|m|h|d)?$/;
const UNIT_MS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const READS = 'country or cc, session or sessid, sesstime, sessionduration or ttl, mode';

function isParameterName(piece: string): piece is ParameterName {
  return Object.hasOwn(PARAMETER_OF, piece);
}

function parseCountries(name: string, value: string): string[] {
  const codes = value.toLowerCase().split(',');
  if (codes.length > MAX_SESSION_COUNTRIES) throw new SessionUsernameError(`${name}: at most ${MAX_SESSION_COUNTRIES} codes`);
  for (const c of codes) if (!COUNTRY.test(c)) throw new SessionUsernameError(`${name}: "${c.slice(0, 16)}" is not a two-letter ISO 3166 code`);
  return [...new Set(codes)];
}

function parseLifetime(name: ParameterName, value: string): number {
  if (name !== 'ttl') {
    if (!MINUTES.test(value) || Number(value) === 0) throw new SessionUsernameError(`${name}: whole minutes, at least 1`);
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
    case 'cc':
      return COUNTRY_LIST.test(value);
    case 'sesstime':
    case 'sessionduration':
      return MINUTES.test(value);
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

/** Refuses a gateway targeting parameter exitpool cannot honour, wherever it stands after the first piece. */
function refuseUnsupported(pieces: readonly string[]): void {
  for (let i = 1; i < pieces.length - 1; i++) {
    const name = (pieces[i] as string).toLowerCase();
    if (!Object.hasOwn(UNSUPPORTED_VALUE, name) || !(UNSUPPORTED_VALUE[name] as RegExp).test(pieces[i + 1] as string)) continue;
    throw new SessionUsernameError(`${name} is not supported (exitpool reads ${READS}); write a dash of the key as %2D`);
  }
}

/**
 * A parameter recognised further in, not followed through to the end by parameters: what
 * follows it is a typo or another gateway's parameter, and reading the whole as a plain key
 * would silently drop the country, lifetime or mode asked for. Only a name with a value that
 * fits it counts (`dark-mode-test` and `session-7-x` stay plain keys), except `country`, whose
 * loss would send a session out of any country.
 */
function refuseStrayAfterParameter(pieces: readonly string[]): void {
  for (let i = 1; i < pieces.length - 1; i++) {
    const name = (pieces[i] as string).toLowerCase();
    const value = pieces[i + 1] as string;
    if (!recognisedInKey(name, value)) continue;
    let j = i + 2;
    while (j + 1 < pieces.length && isParameterName((pieces[j] as string).toLowerCase()) && VALUE.test(pieces[j + 1] as string)) j += 2;
    const after = pieces[j] ?? '';
    throw new SessionUsernameError(`"${after.slice(0, 16)}" after ${name}-${value.slice(0, 24)} is not a parameter (exitpool reads ${READS}); write a dash of the key as %2D`);
  }
}

/**
 * Splits a proxy username into its session key and parameters. Throws SessionUsernameError for
 * a parameter that is malformed, repeated or unsupported; a username without parameters is
 * returned as it is.
 */
export function parseSessionUsername(username: string): ParsedUsername {
  const pieces = username.split('-');
  const found = new Map<Parameter, { name: ParameterName; value: string }>();
  while (pieces.length >= 3) {
    const name = (pieces[pieces.length - 2] as string).toLowerCase();
    const value = pieces[pieces.length - 1] as string;
    if (!isParameterName(name)) break;
    const param = PARAMETER_OF[name];
    if (!VALUE.test(value)) throw new SessionUsernameError(`${name}: malformed value`);
    const twice = found.get(param);
    if (twice !== undefined) {
      if (twice.name === name) throw new SessionUsernameError(`${name} is given twice`);
      throw new SessionUsernameError(`${name} and ${twice.name} both set the ${param === 'session' ? 'session id' : param}: give one`);
    }
    found.set(param, { name, value });
    pieces.length -= 2;
  }
  refuseUnsupported(pieces);
  refuseStrayAfterParameter(pieces);
  if (found.size === 0) return { key: username, params: {} };
  const params: SessionParams = {};
  const country = found.get('country');
  if (country !== undefined) params.countries = parseCountries(country.name, country.value);
  const lifetime = found.get('lifetime');
  if (lifetime !== undefined) params.lifetimeMs = parseLifetime(lifetime.name, lifetime.value);
  const mode = found.get('mode');
  if (mode !== undefined) {
    const m = mode.value.toLowerCase();
    if (!(SESSION_MODES as readonly string[]).includes(m)) throw new SessionUsernameError(`mode: sticky or rotating, not "${mode.value.slice(0, 16)}"`);
    params.mode = m as SessionMode;
  }
  // `session-<id>` and `sessid-<id>` (the gateways' own spellings) stay part of the key, as written.
  const session = found.get('session');
  const base = decodeKey(pieces.join('-'));
  return { key: session === undefined ? base : `${base}-${session.name}-${session.value}`, params };
}

/** The parameters in one canonical text: equal for two usernames that ask for the same. */
export function sessionParamsTag(p: SessionParams): string {
  return `${p.countries?.join(',') ?? ''}|${p.lifetimeMs ?? ''}|${p.mode ?? ''}`;
}
