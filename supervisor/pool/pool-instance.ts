import type { EventEmitter } from 'node:events';

export interface InstanceExit {
  ip: string;
  country: string;
  nickname: string;
  confirmed: boolean;
  retiredIp: string;
  pinned: string;
}

/**
 * What the pool needs of one supervised tor instance. Reads are cached state: nothing
 * here waits on a control port, so routing never does either.
 * Events: 'ready' (bootstrapped), 'unready' (died, restarting), 'exit' (exit knowledge
 * changed), 'rotated' (a rotation finished: a new exit is known or it was abandoned),
 * 'unresponsive' / 'responsive' (a ready process stopped / resumed answering its control port).
 */
export interface PoolInstance extends EventEmitter {
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
  exit(): InstanceExit;
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Starts a rotation (NEWNYM, close idle old circuits); resolves once it has begun. Throws NotBootstrappedError before bootstrap. */
  rotate(): Promise<void>;
  /** Restarts the process; resolves once the new process is spawned (not bootstrapped). */
  restart(wipe: boolean): Promise<void>;
}
