import { AUDIT_TYPES, type AuditEvent } from '../../shared/api/audit-event.js';
import { MAX_SESSION_KEY_BYTES } from '../../shared/api/session-key.js';
import type { StatsSample } from '../../shared/api/views.js';
import { MAX_POOL_SIZE } from '../../shared/config/limits.js';
import { InvalidStoredRecord, MAX_STORED_COUNT, numberField, objectField, oneOfField, parseObject, stringField, type StoredObject } from './stored-value.js';

const MAX_MESSAGE_LENGTH = 4096;
/** Details are what the service wrote; a stored one larger than this is not. */
const MAX_DETAILS_BYTES = 16_384;
const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{3})?Z$/;

function isoTimeField(o: StoredObject, name: string): string {
  const t = stringField(o, name, 30);
  if (!ISO_TIME.test(t) || Number.isNaN(Date.parse(t))) throw new InvalidStoredRecord(`${name}: not an ISO 8601 UTC time`);
  return t;
}

function nullableNumber(o: StoredObject, name: string, max: number): number | null {
  return o[name] === null ? null : numberField(o, name, 0, max);
}

export function encodeAuditEvent(e: AuditEvent): string {
  return JSON.stringify(e);
}

export function decodeAuditEvent(seq: number, text: string): AuditEvent {
  const o = parseObject(text);
  const id = numberField(o, 'id', 1, MAX_STORED_COUNT);
  if (id !== seq) throw new InvalidStoredRecord('id: does not match the record');
  const details = objectField(o, 'details');
  if (JSON.stringify(details).length > MAX_DETAILS_BYTES) throw new InvalidStoredRecord('details: too large');
  const session = o.session === null ? null : stringField(o, 'session', MAX_SESSION_KEY_BYTES);
  return {
    id,
    time: isoTimeField(o, 'time'),
    type: oneOfField(o, 'type', AUDIT_TYPES),
    instance: nullableNumber(o, 'instance', MAX_POOL_SIZE - 1),
    session,
    message: stringField(o, 'message', MAX_MESSAGE_LENGTH),
    details,
  };
}

export function encodeStatsSample(s: StatsSample): string {
  return JSON.stringify(s);
}

export function decodeStatsSample(text: string): StatsSample {
  const o = parseObject(text);
  const latency = objectField(o, 'latency_ms');
  const ms = (name: string): number => numberField(latency, name, 0, MAX_STORED_COUNT, false);
  return {
    time: isoTimeField(o, 'time'),
    interval_secs: numberField(o, 'interval_secs', 1, 3600),
    requests: numberField(o, 'requests', 0, MAX_STORED_COUNT),
    failures: numberField(o, 'failures', 0, MAX_STORED_COUNT),
    bytes_up: numberField(o, 'bytes_up', 0, MAX_STORED_COUNT),
    bytes_down: numberField(o, 'bytes_down', 0, MAX_STORED_COUNT),
    latency_ms: { p50: ms('p50'), p90: ms('p90'), p99: ms('p99') },
    sessions: numberField(o, 'sessions', 0, MAX_STORED_COUNT),
    routable: numberField(o, 'routable', 0, MAX_POOL_SIZE),
  };
}
