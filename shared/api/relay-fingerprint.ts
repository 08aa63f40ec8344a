/** A relay fingerprint as the API takes it: 40 hexadecimal digits, optionally after `$`. */
const RELAY_FINGERPRINT = /^\$?([0-9A-Fa-f]{40})$/;

/** The fingerprint in tor's form (upper case, no `$`), or undefined when `value` is not one. */
export function relayFingerprint(value: unknown): string | undefined {
  if (typeof value !== 'string') return undefined;
  return RELAY_FINGERPRINT.exec(value)?.[1]?.toUpperCase();
}
