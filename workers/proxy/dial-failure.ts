/**
 * How a failed dial through an instance is judged (for scoring) and reported to a SOCKS client.
 */
import type { TransportFailureRecord } from '../../shared/ipc/protocol.js';
import { isPrivateDestination } from './private-destination.js';
import { ReplyCode, type Socks5Target } from './socks5-protocol.js';
import type { SocksDialError } from './socks5-client.js';

/** `host:port`, IPv6 literals bracketed; the host lower-cased (names are case-insensitive). */
export function destinationOf(target: Socks5Target): string {
  const host = target.host.toLowerCase();
  return target.type === 'ipv6' ? `[${host}]:${target.port}` : `${host}:${target.port}`;
}

/**
 * null when the caller aborted (the client went away): that is nobody's failure.
 *
 * A private or loopback destination is refused by the network by design, so a refusal, or a
 * timeout while tor is working on the CONNECT, is not scored. Failing to reach the instance's
 * SocksPort at all is the instance's fault whatever the destination.
 */
export function transportFailureOf(error: SocksDialError, target: Socks5Target): TransportFailureRecord | null {
  const destinationExcused = isPrivateDestination(target.host);
  switch (error.kind) {
    case 'aborted':
      return null;
    case 'refused': {
      const socksReply = error.replyCode ?? ReplyCode.GeneralFailure;
      const failure: TransportFailureRecord = { kind: 'socks_refused', socksReply, scored: !destinationExcused };
      // Tor answered about reaching the destination: the supervisor judges whose fault it was
      // (supervisor/verdicts/failure-classes.ts), checking the destination through another exit.
      if (!destinationExcused) failure.destination = destinationOf(target);
      return failure;
    }
    case 'timeout': {
      // While tor works on the CONNECT the destination (or the exit) is slow; before that, tor itself is.
      const reachingDestination = error.phase === 'awaiting-reply';
      const failure: TransportFailureRecord = { kind: 'timeout', scored: !(destinationExcused && reachingDestination) };
      if (reachingDestination && !destinationExcused) failure.destination = destinationOf(target);
      return failure;
    }
    case 'connect':
    case 'protocol':
    case 'closed':
      return { kind: 'dial', scored: true };
  }
}

/** The SOCKS5 reply for the client: tor's own code when tor refused, TTL expired for a deadline (as tor does), else general failure. */
export function socksReplyForDialError(error: SocksDialError): number {
  if (error.kind === 'refused' && error.replyCode !== null) return error.replyCode;
  if (error.kind === 'timeout') return ReplyCode.TtlExpired;
  return ReplyCode.GeneralFailure;
}
