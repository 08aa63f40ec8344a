import net from 'node:net';
import os from 'node:os';
import { parseDuration } from './duration.js';
import { ADMIN_PASSWORD_MIN_LENGTH, checkSecret, PROXY_TOKEN_MIN_LENGTH, REDIS_PASSWORD_MIN_LENGTH, redisPassword, SIGNING_SECRET_MIN_LENGTH } from './secret-values.js';

/** Value parsers shared by the variable table. Each throws a plain Error whose message names the problem. */

export function parseBoolean(raw: string): boolean {
  const v = raw.trim().toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(v)) return true;
  if (['0', 'false', 'no', 'off', ''].includes(v)) return false;
  throw new Error(`not a boolean: ${JSON.stringify(raw)} (use true/false, 1/0, yes/no, on/off)`);
}

export function integerIn(min: number, max: number): (raw: string) => number {
  return (raw) => {
    const v = raw.trim();
    if (!/^-?\d+$/.test(v)) throw new Error(`not an integer: ${JSON.stringify(raw)}`);
    const n = Number(v);
    if (n < min || n > max) throw new Error(`must be between ${min} and ${max}, got ${n}`);
    return n;
  };
}

export function durationIn(minMs: number, maxMs: number): (raw: string) => number {
  return (raw) => {
    const ms = parseDuration(raw);
    if (ms < minMs || ms > maxMs) throw new Error(`must be between ${minMs} ms and ${maxMs} ms, got ${ms} ms`);
    return ms;
  };
}

export function oneOf<T extends string>(values: readonly T[]): (raw: string) => T {
  return (raw) => {
    const v = raw.trim().toLowerCase();
    if ((values as readonly string[]).includes(v)) return v as T;
    throw new Error(`must be one of ${values.join(', ')}, got ${JSON.stringify(raw)}`);
  };
}

/**
 * STATE_STORE: `sqlite`, `none`, or a `redis://` / `rediss://` URL (its credentials stay out of
 * every log). A password in the URL is held to the secrets' rules (secret-values.ts); a URL
 * without one is accepted (a Redis on a private network without requirepass).
 */
export function stateStore(raw: string): StateStoreSetting {
  const v = raw.trim();
  if (v.toLowerCase() === 'sqlite' || v.toLowerCase() === 'none') return v.toLowerCase() as 'sqlite' | 'none';
  let url: URL;
  try {
    url = new URL(v);
  } catch {
    throw new Error('must be sqlite, none or a redis:// URL');
  }
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') throw new Error('must be sqlite, none or a redis:// URL');
  if (url.hostname === '') throw new Error('the redis URL names no host');
  const password = redisPassword(url);
  if (password !== null) checkSecret(password, REDIS_PASSWORD_MIN_LENGTH, 'the Redis password in the URL');
  return v as `redis://${string}`;
}

/** Names a node in Redis keys and in the API: letters, digits, `_`, `.` and `-`. */
const NODE_NAME = /^[A-Za-z0-9_.-]{1,64}$/;

/**
 * NODE_NAME: empty means the machine's host name (a StatefulSet pod's stable name), with the
 * characters a key must not hold replaced by `-`.
 */
export function nodeName(raw: string, hostname: () => string = () => os.hostname()): string {
  const v = raw.trim();
  if (v === '') {
    const fromHost = hostname().replace(/[^A-Za-z0-9_.-]/g, '-').slice(0, 64);
    return fromHost === '' ? 'node' : fromHost;
  }
  if (!NODE_NAME.test(v)) throw new Error('must be 1 to 64 letters, digits, _, . or -');
  return v;
}

/**
 * NODE_ADDRESS: a host name or IP address (no port, no brackets) the other nodes can reach this
 * one at; empty: decided at start from BIND_HOST and the host name.
 */
export function nodeAddress(raw: string): string {
  const v = raw.trim();
  if (v === '') return '';
  if (!/^[A-Za-z0-9._:-]{1,253}$/.test(v) || v.startsWith('-') || (v.includes(':') && net.isIPv6(v) === false)) {
    throw new Error('must be a host name or an IP address, without a port');
  }
  return v;
}

/** FLEET_RESEED: a fleet epoch id as the nodes log it (supervisor/fleet/fleet-epoch.ts); empty: none. */
export function fleetEpoch(raw: string): string {
  const v = raw.trim();
  if (v !== '' && !/^[A-Za-z0-9_-]{1,64}$/.test(v)) throw new Error('must be a fleet epoch as the nodes log it (letters, digits, _ and -, at most 64)');
  return v;
}

export type StateStoreSetting = 'sqlite' | 'none' | `redis://${string}` | `rediss://${string}`;

export function port(raw: string): number {
  return integerIn(1, 65535)(raw);
}

const COUNTRY = /^\{[a-zA-Z]{2}\}$/;
const FINGERPRINT = /^\$?[0-9A-Fa-f]{40}$/;
const NICKNAME = /^[A-Za-z0-9]{1,19}$/;
/**
 * A bare two-letter entry (`de`) is read as a country code. Users write country lists that way;
 * tor would read it as a relay nickname and match nothing useful. (A relay whose nickname has two
 * letters is named by its fingerprint instead.)
 */
const BARE_COUNTRY = /^[a-zA-Z]{2}$/;

/**
 * Tor node lists as ExitNodes accepts them: braced country codes ({de}), fingerprints, nicknames;
 * bare two-letter country codes (de) are braced.
 */
export function nodeList(raw: string): string[] {
  const items = raw
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '')
    .map((s) => (BARE_COUNTRY.test(s) ? `{${s}}` : s));
  for (const item of items) {
    if (!COUNTRY.test(item) && !FINGERPRINT.test(item) && !NICKNAME.test(item)) {
      throw new Error(`not a country code like {de}, a relay fingerprint or a nickname: ${JSON.stringify(item)}`);
    }
  }
  return items.map((s) => (COUNTRY.test(s) ? s.toLowerCase() : s));
}

/** Extra torrc lines: newline-separated (a literal "\n" also separates, for one-line env files). */
export function torrcLines(raw: string): string[] {
  const lines = raw
    .split(/\r?\n|\\n/)
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
  for (const line of lines) {
    if (/[\0]/.test(line)) throw new Error('torrc lines must not contain NUL bytes');
  }
  return lines;
}

export interface RateLimit {
  attempts: number;
  windowMs: number;
}

/** "N/DURATION" (e.g. 10/5m): N failures per window; a bare N uses the default window. */
export function rateLimit(defaultWindowMs: number): (raw: string) => RateLimit {
  return (raw) => {
    const [count, window] = raw.trim().split('/', 2);
    const attempts = integerIn(1, 1_000_000)(count ?? '');
    const windowMs = window === undefined ? defaultWindowMs : durationIn(1000, 24 * 3_600_000)(window);
    return { attempts, windowMs };
  };
}

export function nonEmptyText(maxLength: number): (raw: string) => string {
  return (raw) => {
    if (raw.length === 0) throw new Error('must not be empty');
    if (raw.length > maxLength) throw new Error(`must be at most ${maxLength} characters`);
    if (/[\0-\x1f\x7f]/.test(raw)) throw new Error('must not contain control characters');
    return raw;
  };
}

const TOKEN_SHAPE = new RegExp(`^tp_[A-Za-z0-9_-]{${PROXY_TOKEN_MIN_LENGTH},128}$`);

/** PROXY_TOKEN: tp_ and at least PROXY_TOKEN_MIN_LENGTH characters, not a placeholder. */
export function tokenSecret(raw: string): string {
  const v = raw.trim();
  checkSecret(v, 0);
  if (!TOKEN_SHAPE.test(v)) {
    throw new Error(`must be a token: tp_ followed by at least ${PROXY_TOKEN_MIN_LENGTH} (at most 128) letters, digits, - or _`);
  }
  return v;
}

/** ADMIN_PASSWORD: any text of ADMIN_PASSWORD_MIN_LENGTH to 1024 characters, not a placeholder. */
export function adminPassword(raw: string): string {
  const v = nonEmptyText(1024)(raw);
  checkSecret(v, ADMIN_PASSWORD_MIN_LENGTH);
  return v;
}

/**
 * API_ALLOWED_HOSTS: comma-separated host names (no port, no scheme), lowercased, or `*` alone.
 * Empty means none beyond the built-in ones (IP literals, localhost, BIND_HOST).
 */
export function hostList(raw: string): string[] {
  const names = raw.split(',').map((n) => n.trim().toLowerCase().replace(/\.$/, '')).filter((n) => n !== '');
  if (names.includes('*')) {
    if (names.length > 1) throw new Error('* allows every host: list it alone');
    return ['*'];
  }
  for (const name of names) {
    if (!/^[a-z0-9_](?:[a-z0-9_-]{0,62})(?:\.[a-z0-9_](?:[a-z0-9_-]{0,62}))*$/.test(name) || name.length > 253) {
      throw new Error(`not a host name: ${JSON.stringify(name)} (names only: no scheme, port or path)`);
    }
  }
  return names;
}

/** URLs of an EGRESS_PROBE_URLS list at most; more would only be tried after the probe's time ran out. */
export const MAX_EGRESS_PROBE_URLS = 8;
const MAX_URL_LENGTH = 2048;

/** One http: or https: URL without credentials (they would be sent through every exit probed). */
export function fetchUrl(raw: string): string {
  const v = raw.trim();
  if (v.length > MAX_URL_LENGTH) throw new Error(`a URL longer than ${MAX_URL_LENGTH} characters`);
  let url: URL;
  try {
    url = new URL(v);
  } catch {
    throw new Error(`not a URL: ${JSON.stringify(v.slice(0, 80))}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error(`${JSON.stringify(v.slice(0, 80))}: only http: and https: URLs`);
  if (url.username !== '' || url.password !== '') throw new Error(`${url.host}: no credentials in the URL (they would reach every exit probed)`);
  if (url.hostname === '') throw new Error(`${JSON.stringify(v.slice(0, 80))} names no host`);
  return url.href;
}

/** EGRESS_PROBE_URLS: comma-separated http(s) URLs, tried in order; `none` turns probing off. */
export function fetchUrlList(raw: string): string[] {
  if (raw.trim().toLowerCase() === 'none') return [];
  const urls = raw.split(',').map((u) => u.trim()).filter((u) => u !== '').map(fetchUrl);
  if (urls.length > MAX_EGRESS_PROBE_URLS) throw new Error(`at most ${MAX_EGRESS_PROBE_URLS} URLs, got ${urls.length}`);
  return urls;
}

/** EXIT_LIST: empty, an http(s) URL (fetched through the pool), or an absolute file path. */
export function exitListSource(raw: string): string {
  const v = raw.trim();
  if (v === '') return '';
  if (/^https?:/i.test(v)) return fetchUrl(v);
  if (!v.startsWith('/')) throw new Error(`${JSON.stringify(v.slice(0, 80))}: an http(s) URL or an absolute file path`);
  if (v.length > 4096 || v.includes('\0')) throw new Error('not a file path');
  return v;
}

/** MIN_ROUTABLE: a number of instances, or a share of the pool size as N% (1 to 100). */
export type RoutableFloor = { kind: 'count'; count: number } | { kind: 'share'; percent: number };

export function routableFloor(raw: string): RoutableFloor {
  const v = raw.trim();
  const share = /^(\d{1,3})%$/.exec(v);
  if (share) {
    const percent = Number(share[1]);
    if (percent < 1 || percent > 100) throw new Error(`a share must be between 1% and 100%, got ${v}`);
    return { kind: 'share', percent };
  }
  return { kind: 'count', count: integerIn(1, 1000)(v) };
}

/** The floor for a pool of `size` instances: never below 1, never above the pool. */
export function routableFloorFor(floor: RoutableFloor, size: number): number {
  const wanted = floor.kind === 'count' ? floor.count : Math.ceil((floor.percent / 100) * size);
  return Math.max(1, Math.min(size, wanted));
}

/** SIGNING_SECRET: at least SIGNING_SECRET_MIN_LENGTH characters, so it carries about as much as the generated one; not a placeholder. */
export function signingSecret(raw: string): string {
  const v = raw.trim();
  checkSecret(v, 0);
  if (v.length < SIGNING_SECRET_MIN_LENGTH) throw new Error(`must be at least ${SIGNING_SECRET_MIN_LENGTH} characters (for example: openssl rand -base64 32)`);
  if (v.length > 1024) throw new Error('must be at most 1024 characters');
  if (/[\0-\x1f\x7f]/.test(v)) throw new Error('must not contain control characters');
  return v;
}
