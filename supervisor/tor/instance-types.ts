import type { Logger } from '../../shared/logger.js';
import type { ExitDownVerdict, ExitLivenessLimits } from './exit-liveness.js';

/** Public types of one supervised tor instance (see instance.ts and README.md). */

export interface TorInstanceOptions {
  /** Instance index (the API's instance id); also names the data directory `<dataDir>/tor/<index>`. */
  index: number;
  /** DATA_DIR; the instance lives in `<dataDir>/tor/<index>`. Relative paths are resolved. */
  dataDir: string;
  /** TCP SocksPort on 127.0.0.1, used only when the Unix socket path would be too long. */
  socksPort?: number;
  /** TCP control port on 127.0.0.1, used only when the Unix socket path would be too long. */
  controlPort?: number;
  /** Default `tor` (found on PATH). */
  torBinary?: string;
  /** Optional --defaults-torrc file (e.g. an empty one, so /etc/tor/torrc-defaults cannot add options). */
  defaultsTorrc?: string;
  /** Default process.pid: tor exits by itself when this process is gone. */
  supervisorPid?: number;
  /** TOR_CONFLUX; default false (conflux legs can change the exit under one session). */
  conflux?: boolean;
  /** TOR_MAX_CIRCUIT_DIRTINESS in seconds; default 3600. */
  maxCircuitDirtinessSecs?: number;
  /** TOR_EXIT_NODES, already split: `['{de}', '{nl}']` (see node-list.ts parseNodeList). */
  exitNodes?: readonly string[];
  /** TOR_STRICT_NODES; written only when given. */
  strictNodes?: boolean;
  /** Appended to the torrc last (private test network, bridges, GeoIPFile); may override. */
  extraTorrcLines?: readonly string[];
  /** PIN_EXIT_RELAY: lock the instance to the first exit it knows. */
  pinExitRelay?: boolean;
  /**
   * Without this, a torrc lacking the private-network markers (TestingTorNetwork 1,
   * UseDefaultFallbackDirs 0, DirAuthority on 127.x) is refused with PublicNetworkRefusedError.
   * Production sets it explicitly.
   */
  allowPublicNetwork?: boolean;
  /** BOOTSTRAP_STALL_TIMEOUT: no bootstrap progress for this long restarts tor. Default 120 s. */
  stallTimeoutMs?: number;
  /** Client-side NEWNYM rate limit; default 10 s (tor's own). */
  newnymCooldownMs?: number;
  /** A rotation that names no new exit within this gives up (outcome 'timeout'). Default 60 s. */
  rotationTimeoutMs?: number;
  /** SIGTERM → SIGKILL grace on stop and restart. Default 10 s. */
  stopGraceMs?: number;
  /** Backoff of restarts after unexpected deaths. Defaults 1 s doubling to 60 s. */
  restartBackoffInitialMs?: number;
  restartBackoffMaxMs?: number;
  /** Per control command deadline. Default 10 s. */
  commandTimeoutMs?: number;
  /**
   * Liveness of a ready tor: a trivial control command every `livenessIntervalMs`, answered within
   * `livenessTimeoutMs`. LIVENESS_MISSES misses in a row make the instance unresponsive (out of
   * routing); unresponsive for `unresponsiveRestartMs` restarts it, keeping state. Defaults:
   * INSTANCE_DEFAULTS (instance-options.ts).
   */
  livenessIntervalMs?: number;
  livenessTimeoutMs?: number;
  unresponsiveRestartMs?: number;
  /** Limits of the pinned exit's liveness watch (exit-liveness.ts); default EXIT_LIVENESS_LIMITS. Tests shorten them. */
  exitLivenessLimits?: ExitLivenessLimits;
  /** Environment of the tor process (tests use it for LD_PRELOAD shims). Default process.env. */
  env?: NodeJS.ProcessEnv;
  /** tor warnings expected in this setting (a private network's), logged at debug instead of warn. */
  expectedWarnings?: readonly RegExp[];
  log?: Logger;
}

/**
 * idle: never started. starting: spawned, control port not yet connected. bootstrapping:
 * connected, below 100 %. ready: bootstrapped. backoff: died, waiting to be restarted.
 * restarting / stopping: tearing down. stopped: stopped by stop() (start() may run it again).
 */
export type InstanceLifecycle =
  | 'idle'
  | 'starting'
  | 'bootstrapping'
  | 'ready'
  | 'backoff'
  | 'restarting'
  | 'stopping'
  | 'stopped';

/** The exit fields of the API's instance resource (docs/api.md). Empty strings where unknown. */
export interface ExitState {
  exitIp: string;
  exitCountry: string;
  exitNickname: string;
  /** 40 hex digits of the exit relay, empty when exitIp is empty. */
  exitFingerprint: string;
  exitConfirmed: boolean;
  /** Only while exitIp is empty after a rotation: the exit it discarded; never the current exit. */
  retiredExitIp: string;
  /** Fingerprint of the relay the instance is locked to (PIN_EXIT_RELAY), else empty. */
  pinnedExit: string;
  /** Mid-rotation: the pool must not route sessions here. */
  rotating: boolean;
}

export interface InstanceSnapshot extends ExitState {
  id: number;
  lifecycle: InstanceLifecycle;
  running: boolean;
  ready: boolean;
  bootstrap: number;
  /** 0 when no process is running. */
  pid: number;
  uptimeSecs: number;
  socksAddr: string;
  /** Milliseconds until a NEWNYM would take effect at once (0 = now). */
  newnymCooldownMs: number;
  /** Restarts of any cause since construction. */
  restarts: number;
}

/** `exit-down`: the relay a rotation pinned was found down (exit-liveness.ts) before the rotation ended. */
export type RotationFailure = 'timeout' | 'stopped' | 'restarted' | 'died' | 'failed' | 'exit-down';

export type NewnymOutcome = { ok: true; at: number; waitedMs: number } | { ok: false; reason: RotationFailure; error?: Error };

export type RotationOutcome = { ok: true; exit: ExitState } | { ok: false; reason: RotationFailure; error?: Error };

/**
 * Handle of one rotation. Both promises always resolve (never reject), so a caller may ignore
 * them. A rotate() while a rotation is still running returns that rotation's ticket.
 */
export interface RotationTicket {
  readonly id: number;
  /** NEWNYM accepted by tor, after waiting out the cooldown if one was running. */
  readonly newnymSent: Promise<NewnymOutcome>;
  /** A new exit is known (exitIp set again), or the rotation gave up. */
  readonly done: Promise<RotationOutcome>;
}

export interface BootstrapProgress {
  percent: number;
  tag?: string;
  summary?: string;
}

export interface TorInstanceEvents {
  state: [{ lifecycle: InstanceLifecycle; previous: InstanceLifecycle }];
  bootstrap: [BootstrapProgress];
  ready: [];
  'exit-changed': [ExitState];
  /** No circuit through the pinned exit could be built within the rotation timeout. */
  'exit-unreachable': [{ fingerprint: string }];
  /** The pinned exit does not answer (exit-liveness.ts): once per pin, with the evidence. */
  'exit-down': [ExitDownVerdict];
  /** The process died without being asked to; a restart is scheduled after restartInMs. */
  died: [{ code: number | null; signal: string | null; restartInMs: number }];
  /** No bootstrap progress for stallTimeoutMs; a restart follows (wipe on repeated stalls). */
  stalled: [{ percent: number; wipe: boolean }];
  /** A ready tor stopped answering its control port (frozen, overloaded): route nothing to it. */
  unresponsive: [{ silentForMs: number }];
  /** It answers again after being unresponsive. */
  responsive: [];
}
