/** Typed failures of an IPC request, so callers map them to a refusal without string matching. */
export class IpcError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** No answer within the deadline: the other side is alive but stalled (or very busy). */
export class IpcTimeoutError extends IpcError {
  constructor(readonly method: string, readonly timeoutMs: number) {
    super(`IPC request ${method} got no answer within ${timeoutMs} ms`);
  }
}

/** The other process is gone (exited or disconnected); pending and new requests fail at once. */
export class IpcPeerGoneError extends IpcError {
  constructor(readonly method: string) {
    super(`IPC request ${method} failed: the other process is gone`);
  }
}

/** The handler on the other side threw; `code` carries its typed error name when it had one. */
export class IpcRemoteError extends IpcError {
  constructor(readonly method: string, readonly code: string, readonly remoteMessage: string) {
    super(`IPC request ${method} failed remotely (${code}): ${remoteMessage}`);
  }
}

/** Nobody on the other side handles this method: a programming error, surfaced loudly. */
export class IpcUnknownMethodError extends IpcError {}
