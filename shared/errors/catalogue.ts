/**
 * Every error exitpool answers a caller with, by a stable code. The supervisor and the workers
 * throw ExitpoolError with one of these codes; IPC carries the code across (IpcRemoteError.code);
 * the API worker maps it to an HTTP status in one table (workers/api/error-status.ts). Codes are
 * part of the contract: rename none, add new ones at the end. Node-free, like the rest of shared/.
 */
export const ERROR_CODES = {
  EXITPOOL_INVALID_REQUEST: 'a body, parameter or value the endpoint does not accept',
  EXITPOOL_FORBIDDEN: 'a valid credential without the right for this action',
  EXITPOOL_NO_SUCH_INSTANCE: 'no instance has this id',
  EXITPOOL_NO_SUCH_SESSION: 'no session has this key (or the caller may not address it)',
  EXITPOOL_NO_SUCH_TOKEN: 'no token has this id',
  EXITPOOL_NOT_BOOTSTRAPPED: 'the instance has not bootstrapped yet',
  EXITPOOL_INSTANCE_STATE: 'the instance is in a state that refuses this action',
  EXITPOOL_TOKEN_NOT_REVOCABLE: 'the token is configuration (PROXY_TOKEN), not revocable through the API',
  EXITPOOL_TOKEN_LIMIT: 'the token store is full',
  EXITPOOL_NO_ROUTABLE_INSTANCE: 'no instance can take the session now',
  EXITPOOL_NOT_ACKNOWLEDGED: 'a worker did not acknowledge a credential change in time',
  EXITPOOL_NOT_PERSISTED: 'the change is in force but DATA_DIR could not be written',
  EXITPOOL_WRONG_ROLE: 'an IPC method asked by a worker of another role',
  EXITPOOL_NO_SUCH_BAN: 'no exit with this fingerprint is banned',
  EXITPOOL_FLEET_UNREACHABLE: "the fleet's Redis did not take a change the other nodes must learn of",
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.hasOwn(ERROR_CODES, value);
}

/** An error with a catalogue code; its message is safe to show to the caller. */
export class ExitpoolError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = new.target.name;
  }
}
