import type { HealthTracker } from '../health/health-tracker.js';
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
}
