import type { FailureKind, HealthTracker } from './health-tracker.js';
import type { PoolInstance } from './pool-instance.js';

/** One instance as the pool keeps it: the process, its health, and what went through it. */
export interface PoolEntry {
  instance: PoolInstance;
  health: HealthTracker;
  /** Out of rotation until released (drain) or removed (retire). */
  draining: boolean;
  retiring: boolean;
  requests: number;
  failures: number;
  bytesUp: number;
  bytesDown: number;
  latencyMs: number;
  /** The kind of the latest scored failure: whether a quarantine it leads to burns the exit. */
  lastFailureKind?: FailureKind;
  /** Recent scored captcha and blocked reports with the site they named ('' for none), newest last (MAX_COMPLAINTS). */
  complaints: { domain: string; at: number }[];
}
