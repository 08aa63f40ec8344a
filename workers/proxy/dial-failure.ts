/**
 * How a failed dial through an instance is judged (for scoring) and reported to a SOCKS client.
 */
import type { TransportFailure } from './proxy-types.js';
import { isPrivateDestination } from './private-destination.js';
import { ReplyCode, type Socks5Target } from './socks5-protocol.js';
import type { SocksDialError } from './socks5-client.js';

/**
 * null when the caller aborted (the client went away): that is nobody's failure.
 *
 * A private or loopback destination is refused by the network by design, so a refusal, or a
 * timeout while tor is working on the CONNECT, is not scored. Failing to reach the instance's
 * SocksPort at all is the instance's fault whatever the destination.
 */
export function transportFailureOf(error: SocksDialError, target: Socks5Target): TransportFailure | null {
  const destinationExcused = isPrivateDestination(target.host);
  switch (error.kind) {
    case 'aborted':
      return null;
    case 'refused':
      return { kind: 'socks_refused', socksReply: error.replyCode ?? ReplyCode.GeneralFailure, scored: !destinationExcused };
    case 'timeout':
      return { kind: 'timeout', scored: !(destinationExcused && error.phase === 'awaiting-reply') };
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
