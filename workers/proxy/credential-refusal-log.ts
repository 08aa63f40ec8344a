import type { Logger } from '../../shared/logger.js';
import { ThrottledWarning } from '../../shared/logging/throttled-warning.js';

/** "credential refused" lines (at warn) are written at most this often per worker. */
export const CREDENTIAL_REFUSAL_LOG_INTERVAL_MS = 10_000;

/**
 * Refused proxy credentials are logged, never audited; a client can cause thousands a second, so
 * each line carries the number refused since the previous one (`occurrences`) and the fields of
 * the refusal that triggered it.
 */
export function credentialRefusalLog(log: Logger): ThrottledWarning {
  return new ThrottledWarning(log, 'credential refused', { intervalMs: CREDENTIAL_REFUSAL_LOG_INTERVAL_MS });
}
