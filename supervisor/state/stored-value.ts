import { MAX_POOL_SIZE } from '../../shared/config/limits.js';

/**
 * Reading a stored value back: the state file is input (it may be old, hand-edited, or written by
 * a bug), so every field is checked for its type and bounds. A record that fails is skipped and
 * counted, never half-applied.
 */

/** A stored record that does not have the shape this version writes. */
export class InvalidStoredRecord extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InvalidStoredRecord';
  }
}

export type StoredObject = Record<string, unknown>;

export function parseObject(text: string): StoredObject {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new InvalidStoredRecord('not JSON');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new InvalidStoredRecord('not an object');
  return value as StoredObject;
}

export function objectField(o: StoredObject, name: string): StoredObject {
  const v = o[name];
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new InvalidStoredRecord(`${name}: not an object`);
  return v as StoredObject;
}

export function stringField(o: StoredObject, name: string, maxLength: number): string {
  const v = o[name];
  if (typeof v !== 'string' || v.length > maxLength) throw new InvalidStoredRecord(`${name}: not a string of at most ${maxLength}`);
  return v;
}

export function oneOfField<T extends string>(o: StoredObject, name: string, values: readonly T[]): T {
  const v = o[name];
  if (typeof v !== 'string' || !(values as readonly string[]).includes(v)) throw new InvalidStoredRecord(`${name}: not one of ${values.join(', ')}`);
  return v as T;
}

/** A finite number within [min, max] (integers when `integer`). */
export function numberField(o: StoredObject, name: string, min: number, max: number, integer = true): number {
  const v = o[name];
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min || v > max || (integer && !Number.isInteger(v))) {
    throw new InvalidStoredRecord(`${name}: not a number in ${min}..${max}`);
  }
  return v;
}

export function booleanField(o: StoredObject, name: string): boolean {
  const v = o[name];
  if (typeof v !== 'boolean') throw new InvalidStoredRecord(`${name}: not a boolean`);
  return v;
}

export function stringListField(o: StoredObject, name: string, maxItems: number, maxLength: number): string[] {
  const v = o[name];
  if (!Array.isArray(v) || v.length > maxItems || !v.every((x) => typeof x === 'string' && x.length <= maxLength)) {
    throw new InvalidStoredRecord(`${name}: not a list of at most ${maxItems} strings`);
  }
  return v as string[];
}

export function listField(o: StoredObject, name: string, maxItems: number): unknown[] {
  const v = o[name];
  if (!Array.isArray(v) || v.length > maxItems) throw new InvalidStoredRecord(`${name}: not a list of at most ${maxItems}`);
  return v;
}

/** An IP address as text, v6 included. */
export const MAX_STORED_ADDRESS_LENGTH = 64;
/** A DNS name. */
export const MAX_STORED_DOMAIN_LENGTH = 253;

/** An instance id written as a record's key ("0".."63", no leading zeros). */
export function instanceIdKey(key: string): number {
  if (!/^(0|[1-9][0-9]{0,3})$/.test(key) || Number(key) >= MAX_POOL_SIZE) throw new InvalidStoredRecord('instance: not an instance id');
  return Number(key);
}

/** An instance id stored as a field. */
export function instanceIdField(o: StoredObject, name: string): number {
  return numberField(o, name, 0, MAX_POOL_SIZE - 1);
}

/** Times are epoch milliseconds; a year-10000 or negative time is a corrupt record, not a date. */
export const MAX_STORED_TIME = 253_402_300_799_000;
/** Counters: exact integers only. */
export const MAX_STORED_COUNT = Number.MAX_SAFE_INTEGER;
