import type { TransportFailureRecord } from '../../shared/ipc/protocol.js';

/**
 * SOCKS5 replies (RFC 1928) as tor gives them for a stream's END reason
 * (stream_end_reason_to_socks5_response in tor's connection_edge.c):
 *
 * | reply | tor's reasons | about |
 * | --- | --- | --- |
 * | 1 general failure | MISC, DONE, DESTROY, INTERNAL, RESOURCELIMIT, TORPROTOCOL, … | the destination (a closed port ends DONE after tor tried three exits) or the circuit |
 * | 2 not allowed | EXITPOLICY, ENTRYPOLICY | the destination's port: no exit carries it |
 * | 3 network unreachable | NET_UNREACHABLE | the destination |
 * | 4 host unreachable | RESOLVEFAILED | the destination's name (it does not resolve) |
 * | 5 connection refused | CONNECTREFUSED, CONNRESET | the destination |
 * | 6 TTL expired | TIMEOUT | the destination, or a dead exit |
 */
const REPLY = { GENERAL: 1, NOT_ALLOWED: 2, NETWORK_UNREACHABLE: 3, HOST_UNREACHABLE: 4, CONNECTION_REFUSED: 5, TTL_EXPIRED: 6, COMMAND: 7, ADDRESS_TYPE: 8 } as const;

/** Replies that can be the destination's doing or the exit's: checked through another exit before anything is blamed. */
const DEPENDS_ON_DESTINATION: ReadonlySet<number> = new Set([REPLY.GENERAL, REPLY.HOST_UNREACHABLE, REPLY.CONNECTION_REFUSED, REPLY.TTL_EXPIRED]);

/** What a failed connection is evidence of (supervisor/verdicts/README.md, "Evidence"). */
export type FailureClass =
  /** Nobody's failure: a private or loopback destination the network refuses by design, an exit policy, an address the client cannot use. */
  | { kind: 'excused' }
  /** The instance's tor could not be reached or did not answer at all: the pool's own evidence against the tor process. */
  | { kind: 'tor' }
  /**
   * It depends on the destination the client chose: the exit is blamed only when the same
   * destination works through another exit; the same failure there is the destination's.
   * `outcome` is what to compare the check's answer with (`reply:N` or `timeout`).
   */
  | { kind: 'destination'; destination: string; outcome: string }
  /** Nothing can be told (a tunnel broken mid-way, a refusal with no destination to check): counted as a failed request, never scored. */
  | { kind: 'unknown' };

export function classifyFailure(failure: TransportFailureRecord | undefined): FailureClass {
  if (failure === undefined) return { kind: 'tor' };
  if (!failure.scored) return { kind: 'excused' };
  switch (failure.kind) {
    case 'dial':
      return { kind: 'tor' };
    case 'timeout':
      // Without a destination the deadline passed before tor answered the SOCKS handshake itself.
      return failure.destination === undefined ? { kind: 'tor' } : { kind: 'destination', destination: failure.destination, outcome: 'timeout' };
    case 'socks_refused': {
      const reply = failure.socksReply ?? REPLY.GENERAL;
      if (!DEPENDS_ON_DESTINATION.has(reply)) return { kind: 'excused' };
      return failure.destination === undefined ? { kind: 'unknown' } : { kind: 'destination', destination: failure.destination, outcome: `reply:${reply}` };
    }
    case 'reset':
      return { kind: 'unknown' };
  }
}

/** How a destination check's answer reads against a failure's outcome. */
export function probeOutcome(result: { ok: boolean; socksReply: number | null }): string {
  if (result.ok) return 'ok';
  return result.socksReply === null ? 'timeout' : `reply:${result.socksReply}`;
}
