/** Base class of every failure the private test network reports; callers branch on the subclass. */
export class TestnetError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** A program the network needs (tor, tor-gencert, gcc) is not installed. */
export class ToolMissingError extends TestnetError {
  constructor(readonly tool: string) {
    super(`required tool not found on PATH: ${tool} (run scripts/setup.sh)`);
  }
}

/** No block of free loopback ports could be reserved (or the requested one is busy). */
export class PortBlockUnavailableError extends TestnetError {
  constructor(
    readonly basePort: number,
    readonly detail: string,
  ) {
    super(`port block at ${basePort} unavailable: ${detail}`);
  }
}

/** The work dir belongs to a network whose owning process is still alive, or is not a testnet dir. */
export class WorkDirInUseError extends TestnetError {
  constructor(
    readonly workDir: string,
    readonly detail: string,
  ) {
    super(`work dir ${workDir} cannot be used: ${detail}`);
  }
}

/** gcc failed to build the LD_PRELOAD shim. */
export class ShimBuildError extends TestnetError {
  constructor(
    readonly output: string,
    options?: { cause?: unknown },
  ) {
    super(`building the loopback shim failed: ${output.trim().slice(0, 2000)}`, options);
  }
}

/** A tor of the network runs without the loopback shim mapped: it could reach the outside world. */
export class ShimNotLoadedError extends TestnetError {
  constructor(
    readonly nickname: string,
    readonly pid: number,
  ) {
    super(`loopback shim is not mapped into tor ${nickname} (pid ${pid}); network stopped for safety`);
  }
}

/** A helper program (tor-gencert, tor --list-fingerprint) failed while preparing keys. */
export class KeyGenerationError extends TestnetError {
  constructor(
    readonly nickname: string,
    readonly detail: string,
  ) {
    super(`key generation for ${nickname} failed: ${detail.trim().slice(0, 2000)}`);
  }
}

/** A tor process ended on its own (not through stop()). */
export class TorExitedError extends TestnetError {
  constructor(
    readonly nickname: string,
    readonly code: number | null,
    readonly signal: string | null,
    readonly logTail: string,
  ) {
    super(`tor ${nickname} exited (code ${String(code)}, signal ${String(signal)}); last log lines:\n${logTail}`);
  }
}

/** A tor did not write its PidFile in time after being spawned. */
export class TorStartTimeoutError extends TestnetError {
  constructor(
    readonly nickname: string,
    readonly timeoutMs: number,
    readonly logTail: string,
  ) {
    super(`tor ${nickname} did not start within ${timeoutMs} ms; last log lines:\n${logTail}`);
  }
}

/** The consensus never listed every relay as required before the deadline. */
export class TestnetNotUsableError extends TestnetError {
  constructor(
    readonly timeoutMs: number,
    readonly problems: readonly string[],
  ) {
    super(`network not usable after ${timeoutMs} ms: ${problems.slice(0, 12).join('; ') || 'no consensus'}`);
  }
}

/** Options that cannot describe a network (too few exits, bad port, unknown country code). */
export class InvalidTestnetOptionsError extends TestnetError {}

/** The network was already stopped when an operation needing it was called. */
export class TestnetStoppedError extends TestnetError {
  constructor() {
    super('the test network has been stopped');
  }
}
