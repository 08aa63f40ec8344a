import type { HealthTracker } from '../health/health-tracker.js';
import type { ExitState } from '../tor/instance-types.js';

/** An instance as the verdicts judge it: its health, and the exit it leaves through now. */
export interface JudgedInstance {
  readonly health: HealthTracker;
  readonly instance: { readonly id: number; exit(): ExitState };
}

/** An instance's SOCKS endpoint, as a proxy worker dials it (its Unix socket when it has one). */
export interface SocksEndpoint {
  host: string;
  port: number;
  path?: string;
}

/**
 * Sessions a verdict moves: all of an instance's (its exit is blamed, or dead), or those of
 * `keys` (they reached, or reported, one site).
 */
export type VerdictMove = { reason: 'quarantine' } | { reason: 'exit_down' } | { reason: 'site_ban'; domain: string; keys: ReadonlySet<string> };

/**
 * What the verdicts need of the pool, defined here and implemented by the pool's instance
 * registry (supervisor/pool/instance-registry.ts): the verdicts never import the pool.
 */
export interface VerdictSubjects {
  judged(id: number): JudgedInstance | undefined;
  /** Instances that take traffic now. */
  routableCount(): number;
  routableId(id: number): boolean;
  /** The pool's target size (MIN_ROUTABLE may be a share of it). */
  poolSize(): number;
  moveSessionsOff(id: number, move: VerdictMove): void;
  /** Another routable instance, on another exit, through which a failed destination can be checked. */
  probeRoute(except: number): SocksEndpoint | null;
}
