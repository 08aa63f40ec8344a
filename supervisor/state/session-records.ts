import { MAX_SESSION_KEY_BYTES } from '../../shared/api/session-key.js';
import { MAX_SESSION_COUNTRIES, SESSION_MODES, type SessionParams } from '../../shared/api/session-username.js';
import type { Session } from '../sessions/session.js';
import type { RestoredSession } from '../sessions/session-table.js';
import {
  booleanField,
  instanceIdField,
  InvalidStoredRecord,
  MAX_STORED_ADDRESS_LENGTH,
  MAX_STORED_COUNT,
  MAX_STORED_DOMAIN_LENGTH,
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

/** The exit a session left through when it was written (its instance's confirmed exit). */
export interface StoredExit {
  ip: string;
  fingerprint: string;
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

/**
 * Reads one stored session; `key` is the record's key, which its body must repeat. Its exit is
 * checked but not returned: it is written for whoever reads the state, while a restart gives the
 * session its IP back through its instance's own stored exit.
 */
export function decodeSession(key: string, text: string): RestoredSession {
  const o = parseObject(text);
  const storedKey = stringField(o, 'key', MAX_SESSION_KEY_BYTES);
  if (storedKey !== key || storedKey.length === 0 || Buffer.byteLength(storedKey, 'utf8') > MAX_SESSION_KEY_BYTES) {
    throw new InvalidStoredRecord('key: does not match the record');
  }
  const createdAt = numberField(o, 'created_at', 0, MAX_STORED_TIME);
  const lastSeen = numberField(o, 'last_seen', createdAt, MAX_STORED_TIME);
  const session: RestoredSession = {
    key: storedKey,
    instance: instanceIdField(o, 'instance'),
    createdAt,
    lastSeen,
    requests: numberField(o, 'requests', 0, MAX_STORED_COUNT),
    failures: numberField(o, 'failures', 0, MAX_STORED_COUNT),
    bytesUp: numberField(o, 'bytes_up', 0, MAX_STORED_COUNT),
    bytesDown: numberField(o, 'bytes_down', 0, MAX_STORED_COUNT),
    recentExits: stringListField(o, 'recent_exits', MAX_STORED_EXITS, MAX_STORED_ADDRESS_LENGTH),
    domains: stringListField(o, 'domains', MAX_STORED_DOMAINS, MAX_STORED_DOMAIN_LENGTH),
  };
  if (o.displaced !== undefined) {
    const d = objectField(o, 'displaced');
    session.displaced = { from: instanceIdField(d, 'from'), burnt: booleanField(d, 'burnt') };
  }
  if (o.params !== undefined) session.params = decodeParams(objectField(o, 'params'));
  const e = objectField(o, 'exit');
  stringField(e, 'ip', MAX_STORED_ADDRESS_LENGTH);
  stringField(e, 'fingerprint', 40);
  return session;
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
