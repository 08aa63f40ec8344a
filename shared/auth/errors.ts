import { ExitpoolError, type ErrorCode } from '../errors/catalogue.js';

/** Base of the authentication errors; their codes are in the catalogue (shared/errors). */
export class AuthError extends ExitpoolError {
  constructor(message: string, code: ErrorCode) {
    super(code, message);
  }
}

/** A request body that is not what the endpoint accepts (400). The message is safe to show. */
export class AuthBadRequestError extends AuthError {
  constructor(message: string) {
    super(message, 'EXITPOOL_INVALID_REQUEST');
  }
}

/**
 * Only a session credential (or anyone, under AUTH_DISABLED) may mint a ticket (403: the
 * credential is valid, it just lacks the right). A ticket never reaches this far as a ticket:
 * it is refused as a session credential first.
 */
export class TicketNotAllowedError extends AuthError {
  constructor(readonly principalKind: string) {
    super(`a ${principalKind} credential cannot request a stream ticket; sign in first`, 'EXITPOOL_FORBIDDEN');
  }
}
