import type { EventEmitter } from 'node:events';
import type { ExitDownVerdict } from '../tor/exit-liveness.js';
import type { ExitState } from '../tor/instance-types.js';

/**
 * The exit of an instance in the tor layer's own words (supervisor/tor/instance-types.ts): the
 * pool reads it as it is, and only the API view (pool-views.ts) renames it for the wire.
 */
export type { ExitState };

/**
 * What an instance tells the pool: 'ready' (bootstrapped), 'unready' (died, restarting), 'exit'
 * (exit knowledge changed), 'rotated' (a rotation finished: a new exit is known or it was
 * abandoned), 'unresponsive' / 'responsive' (a ready process stopped / resumed answering its
 * control port).
 */
export interface PoolInstanceEvents {
  ready: [];
  unready: [];
  exit: [];
  rotated: [];
  unresponsive: [silentForMs: number];
  responsive: [];
  /** The assigned exit turned out unusable (no circuit through it): the pool moves the instance to another. */
  'exit-unreachable': [];
  /** The pinned exit does not answer (the instance's own circuit evidence): the verdicts mark it down and the pool re-pins. */
  'exit-down': [verdict: ExitDownVerdict];
}

/** What a rotation must respect besides the pool's distinctness. */
export interface RotationRequest {
  /** Exit addresses the new exit must not have, nor share a /24 with (a session's recent exits). */
  avoid?: readonly string[];
  /** Sites whose per-site exit bans the new exit must respect (the rotating session's). */
  avoidDomains?: readonly string[];
  /** Why (audit): api, session, sweep, ladder, exit_gone, refresh… */
  why: string;
  /** The session whose rotation asked (its audit events are then session events). */
  session?: string;
  /** Only an exit in one of these countries (a session's username asked for them). */
  countries?: readonly string[];
}

/** What a rotation is heading for. */
export interface RotationPlan {
  /** Fingerprint of the newly assigned exit; '' when tor chooses (no assignment, or none eligible). */
  exit: string;
  /** Why the new exit is not a distinct, fresh one ('' when it is): reported, never hidden. */
  shortage: string;
}

/**
 * What the pool and the health ladder need of one supervised tor instance. Reads are cached
 * state: nothing here waits on a control port, so routing never does either.
 */
export interface PoolInstance extends EventEmitter<PoolInstanceEvents> {
  readonly id: number;
  readonly socksHost: string;
  readonly socksPort: number;
  /** The Unix-socket SocksPort the workers dial; null when the instance listens on socksHost:socksPort. */
  readonly socksPath: string | null;
  pid(): number | null;
  running(): boolean;
  ready(): boolean;
  bootstrap(): number;
  uptimeSecs(): number;
  /** Mid-rotation: out of service until a new exit is known. */
  rotating(): boolean;
  /** false while a ready process does not answer (frozen): out of service until it does or restarts. */
  responsive(): boolean;
  exit(): ExitState;
  start(): Promise<void>;
  stop(): Promise<void>;
  /**
   * Starts a rotation to a new exit (a newly assigned one, or NEWNYM when none is assigned);
   * resolves once it has begun, with what it is rotating to. Throws NotBootstrappedError before
   * bootstrap.
   */
  rotate(request?: RotationRequest): Promise<RotationPlan>;
  /** The remediation ladder's first rung: a new circuit, resolved once a new exit is known (rejects when the rotation fails). */
  newCircuit(): Promise<void>;
  /** Restarts the process; resolves once the new process is spawned (not bootstrapped). */
  restart(wipe: boolean): Promise<void>;
  /** Resolves once bootstrapped; rejects after timeoutMs or when stopped meanwhile. */
  whenReady(timeoutMs: number): Promise<void>;
}
