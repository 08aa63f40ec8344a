import { MAX_SESSION_KEY_BYTES } from '../../shared/api/session-key.js';
import { MAX_SESSION_COUNTRIES, SESSION_MODES, type SessionParams } from '../../shared/api/session-username.js';
import { MAX_POOL_SIZE } from '../../shared/config/limits.js';
import type { Session } from '../sessions/session.js';
import type { RestoredSession } from '../sessions/session-table.js';
import {
  booleanField,
  InvalidStoredRecord,
  MAX_STORED_COUNT,
  MAX_STORED_TIME,
  numberField,
  objectField,
  oneOfField,
  parseObject,
  stringField,
  stringListField,
  type StoredObject,
} from './stored-value.js';

/** SESSION_TTL_MAX tops at 30 days. */
const MAX_STORED_LIFETIME_MS = 30 * 86_400_000;

/** Exit history and reported sites a record may hold: above any setting (EXIT_HISTORY tops at 50). */
const MAX_STORED_EXITS = 64;
const MAX_STORED_DOMAINS = 16;
const MAX_ADDRESS_LENGTH = 64;
const MAX_DOMAIN_LENGTH = 253;

/** The exit a session left through when it was written (its instance's confirmed exit). */
export interface StoredExit {
  ip: string;
  fingerprint: string;
}

export interface StoredSession {
  session: RestoredSession;
  exit: StoredExit;
}

export function encodeSession(s: Session, exit: StoredExit): string {
  return JSON.stringify({
    key: s.key,
    instance: s.instance,
    created_at: s.createdAt,
    last_seen: s.lastSeen,
    requests: s.requests,
    failures: s.failures,
    bytes_up: s.bytesUp,
    bytes_down: s.bytesDown,
    recent_exits: s.recentExits,
    domains: s.domains,
    ...(s.displaced ? { displaced: s.displaced } : {}),
    ...(s.params ? { params: { countries: s.params.countries ?? null, lifetime_ms: s.params.lifetimeMs ?? null, mode: s.params.mode ?? null } } : {}),
    exit,
  });
}

/** Reads one stored session; `key` is the record's key, which its body must repeat. */
export function decodeSession(key: string, text: string): StoredSession {
  const o = parseObject(text);
  const storedKey = stringField(o, 'key', MAX_SESSION_KEY_BYTES);
  if (storedKey !== key || storedKey.length === 0 || Buffer.byteLength(storedKey, 'utf8') > MAX_SESSION_KEY_BYTES) {
    throw new InvalidStoredRecord('key: does not match the record');
  }
  const createdAt = numberField(o, 'created_at', 0, MAX_STORED_TIME);
  const lastSeen = numberField(o, 'last_seen', createdAt, MAX_STORED_TIME);
  const session: RestoredSession = {
    key: storedKey,
    instance: numberField(o, 'instance', 0, MAX_POOL_SIZE - 1),
    createdAt,
    lastSeen,
    requests: numberField(o, 'requests', 0, MAX_STORED_COUNT),
    failures: numberField(o, 'failures', 0, MAX_STORED_COUNT),
    bytesUp: numberField(o, 'bytes_up', 0, MAX_STORED_COUNT),
    bytesDown: numberField(o, 'bytes_down', 0, MAX_STORED_COUNT),
    recentExits: stringListField(o, 'recent_exits', MAX_STORED_EXITS, MAX_ADDRESS_LENGTH),
    domains: stringListField(o, 'domains', MAX_STORED_DOMAINS, MAX_DOMAIN_LENGTH),
  };
  if (o.displaced !== undefined) {
    const d = objectField(o, 'displaced');
    session.displaced = { from: numberField(d, 'from', 0, MAX_POOL_SIZE - 1), burnt: booleanField(d, 'burnt') };
  }
  if (o.params !== undefined) session.params = decodeParams(objectField(o, 'params'));
  const e = objectField(o, 'exit');
  return { session, exit: { ip: stringField(e, 'ip', MAX_ADDRESS_LENGTH), fingerprint: stringField(e, 'fingerprint', 40) } };
}

/** A session's choices, checked as the username parser would have checked them. */
function decodeParams(p: StoredObject): SessionParams {
  const params: SessionParams = {};
  if (p.countries !== null) {
    const countries = stringListField(p, 'countries', MAX_SESSION_COUNTRIES, 2);
    if (!countries.every((c) => /^[a-z]{2}$/.test(c))) throw new InvalidStoredRecord('params.countries: not ISO 3166 codes');
    params.countries = countries;
  }
  if (p.lifetime_ms !== null) params.lifetimeMs = numberField(p, 'lifetime_ms', 1000, MAX_STORED_LIFETIME_MS);
  if (p.mode !== null) params.mode = oneOfField(p, 'mode', SESSION_MODES);
  return params;
}
