import type { HealthTracker } from '../health/health-tracker.js';
import type { PoolInstance } from './pool-instance.js';

/** One instance as the pool keeps it: the process, its health, and what went through it. */
export interface PoolEntry {
  instance: PoolInstance;
  health: HealthTracker;
  /** Out of rotation until released (drain) or removed (retire). */
  draining: boolean;
  retiring: boolean;
  /**
   * Held for session rotations (WARM_SPARES, spare-supply.ts): takes no new session, only those
   * that rotate onto it; not counted in POOL_SIZE. Set when the instance is added, never changed.
   */
  spare: boolean;
  requests: number;
  failures: number;
  bytesUp: number;
  bytesDown: number;
  latencyMs: number;
}
