import { ExitpoolError } from '../../shared/errors/catalogue.js';

/**
 * Typed errors of the Tor-instance layer. Callers branch on the class (instanceof),
 * never on message text.
 */

/** An option handed to the torrc renderer cannot be written safely (bad port, newline, …). */
export class TorrcOptionError extends Error {
  constructor(
    readonly option: string,
    message: string,
  ) {
    super(`torrc option ${option}: ${message}`);
    this.name = 'TorrcOptionError';
  }
}

/**
 * Refused to start a tor whose configuration would join the public Tor network while the
 * caller has not explicitly allowed that (see private-network-guard.ts).
 */
export class PublicNetworkRefusedError extends Error {
  constructor(readonly missing: readonly string[]) {
    super(`refusing to start tor outside a private test network: missing ${missing.join(', ')}`);
    this.name = 'PublicNetworkRefusedError';
  }
}

/** A line from the control port does not follow control-spec §2.3/§2.4. */
export class ControlProtocolError extends Error {
  constructor(
    message: string,
    readonly line: string,
  ) {
    super(message);
    this.name = 'ControlProtocolError';
  }
}

/** A quoted string or KEY=VALUE list in a reply could not be parsed. */
export class ControlArgumentError extends Error {
  constructor(
    message: string,
    readonly text: string,
  ) {
    super(message);
    this.name = 'ControlArgumentError';
  }
}

/** Tor answered a command with a non-2xx status. */
export class ControlCommandError extends Error {
  constructor(
    readonly command: string,
    readonly status: number,
    readonly replyText: string,
  ) {
    super(`control command ${command} failed: ${status} ${replyText}`);
    this.name = 'ControlCommandError';
  }
}

/** No reply within the command's deadline. The connection is then reset (it can no longer be trusted to stay in step). */
export class ControlCommandTimeoutError extends Error {
  constructor(
    readonly command: string,
    readonly timeoutMs: number,
  ) {
    super(`control command ${command} got no reply within ${timeoutMs} ms`);
    this.name = 'ControlCommandTimeoutError';
  }
}

/** The control connection went away while the command was in flight, or the client was closed. */
export class ControlConnectionLostError extends Error {
  constructor(
    readonly command: string,
    reason: string,
  ) {
    super(`control connection lost before ${command} was answered: ${reason}`);
    this.name = 'ControlConnectionLostError';
  }
}

/** Cookie authentication failed (unreadable cookie, or tor refused it). */
export class ControlAuthenticationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ControlAuthenticationError';
  }
}

/** An instance that has not bootstrapped cannot be rotated. */
export class NotBootstrappedError extends ExitpoolError {
  constructor(
    readonly instance: number,
    readonly bootstrap: number,
  ) {
    super('EXITPOOL_NOT_BOOTSTRAPPED', `instance ${instance} has not bootstrapped (${bootstrap}%); it cannot be rotated yet`);
  }
}

/** An operation was asked of an instance that has been stopped for good. */
export class InstanceStoppedError extends Error {
  constructor(readonly instance: number) {
    super(`instance ${instance} is stopped`);
    this.name = 'InstanceStoppedError';
  }
}

/** The instance's files could not be laid out (for example a Unix socket path too long and no TCP fallback port). */
export class InstanceLayoutError extends Error {
  constructor(
    readonly instance: number,
    message: string,
  ) {
    super(`instance ${instance}: ${message}`);
    this.name = 'InstanceLayoutError';
  }
}
