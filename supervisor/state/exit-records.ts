import { relayFingerprint } from '../../shared/api/relay-fingerprint.js';
import type { BanCause, ExitBan } from '../exits/exit-bans.js';
import { MAX_ADDRESSES_PER_EXIT } from '../exits/exit-list.js';
import type { RestoredAssignment } from '../exits/exit-assignments.js';
import {
  instanceIdKey,
  InvalidStoredRecord,
  listField,
  MAX_STORED_ADDRESS_LENGTH,
  MAX_STORED_DOMAIN_LENGTH,
  MAX_STORED_TIME,
  numberField,
  oneOfField,
  parseObject,
  stringField,
} from './stored-value.js';

const BAN_CAUSES: readonly BanCause[] = ['captcha', 'blocked', 'transport', 'unreachable'];
const MAX_NICKNAME_LENGTH = 19;
const MAX_REASON_LENGTH = 1024;

function fingerprintField(o: Record<string, unknown>): string {
  const fp = stringField(o, 'fingerprint', 40);
  if (relayFingerprint(fp) !== fp) throw new InvalidStoredRecord('fingerprint: not 40 upper-case hex digits');
  return fp;
}

/** Stored under the instance id. */
export function encodeAssignment(a: RestoredAssignment): string {
  return JSON.stringify({ fingerprint: a.fingerprint, nickname: a.nickname, address: a.address });
}

export function decodeAssignment(key: string, text: string): { instance: number; assignment: RestoredAssignment } {
  const instance = instanceIdKey(key);
  const o = parseObject(text);
  return {
    instance,
    assignment: { fingerprint: fingerprintField(o), nickname: stringField(o, 'nickname', MAX_NICKNAME_LENGTH), address: stringField(o, 'address', MAX_STORED_ADDRESS_LENGTH) },
  };
}

/** Stored under `<fingerprint>|<domain>`, as the ban table keys it. */
export function banKey(ban: ExitBan): string {
  return `${ban.fingerprint}|${ban.domain}`;
}

export function encodeBan(ban: ExitBan): string {
  return JSON.stringify(ban);
}

export function decodeBan(key: string, text: string): ExitBan {
  const o = parseObject(text);
  const since = numberField(o, 'since', 0, MAX_STORED_TIME);
  // The other addresses the exit was seen leaving from: absent in bans stored before they were measured.
  const seen = o.seen === undefined ? [] : listField(o, 'seen', MAX_ADDRESSES_PER_EXIT).map((_, i) => stringField(o.seen as Record<string, unknown>, String(i), MAX_STORED_ADDRESS_LENGTH));
  const ban: ExitBan = {
    fingerprint: fingerprintField(o),
    address: stringField(o, 'address', MAX_STORED_ADDRESS_LENGTH),
    ...(seen.length > 0 ? { seen } : {}),
    nickname: stringField(o, 'nickname', MAX_NICKNAME_LENGTH),
    domain: stringField(o, 'domain', MAX_STORED_DOMAIN_LENGTH),
    cause: oneOfField(o, 'cause', BAN_CAUSES),
    reason: stringField(o, 'reason', MAX_REASON_LENGTH),
    since,
    until: numberField(o, 'until', since, MAX_STORED_TIME),
  };
  if (banKey(ban) !== key) throw new InvalidStoredRecord('key: does not match the record');
  return ban;
}
