import { ExitpoolError, isErrorCode, type ErrorCode } from '../../shared/errors/catalogue.js';
import { IpcRemoteError } from '../../shared/ipc/errors.js';
import { HttpError } from './http-error.js';

/** The one table from the error catalogue (shared/errors) to the API's HTTP statuses. */
export const HTTP_STATUS_OF: Readonly<Record<ErrorCode, number>> = {
  EXITPOOL_INVALID_REQUEST: 400,
  EXITPOOL_FORBIDDEN: 403,
  EXITPOOL_NO_SUCH_INSTANCE: 404,
  EXITPOOL_NO_SUCH_SESSION: 404,
  EXITPOOL_NO_SUCH_TOKEN: 404,
  EXITPOOL_NO_SUCH_BAN: 404,
  EXITPOOL_NOT_BOOTSTRAPPED: 409,
  EXITPOOL_INSTANCE_STATE: 409,
  EXITPOOL_TOKEN_NOT_REVOCABLE: 409,
  EXITPOOL_TOKEN_LIMIT: 409,
  EXITPOOL_NO_ROUTABLE_INSTANCE: 503,
  EXITPOOL_NOT_ACKNOWLEDGED: 503,
  EXITPOOL_NOT_PERSISTED: 500,
  EXITPOOL_FLEET_UNREACHABLE: 503,
  // A worker asking for another role's method is a programming error, not the caller's.
  EXITPOOL_WRONG_ROLE: 500,
};

/**
 * The HTTP error for a catalogue error, thrown here (ExitpoolError) or by the supervisor (an
 * IpcRemoteError carrying its code); undefined for anything else.
 */
export function httpErrorOfCatalogued(err: unknown): HttpError | undefined {
  let code: ErrorCode;
  let message: string;
  if (err instanceof ExitpoolError) {
    code = err.code;
    message = err.message;
  } else if (err instanceof IpcRemoteError && isErrorCode(err.code)) {
    code = err.code;
    message = err.remoteMessage;
  } else {
    return undefined;
  }
  return new HttpError(HTTP_STATUS_OF[code], message);
}
