import type { DestinationProbe, DestinationProbeResult } from '../../shared/ipc/protocol.js';
import { dialSocks5, SocksDialError } from './socks5-client.js';
import { targetFromHost } from './socks5-protocol.js';

/** A probe waits this long for tor's answer; a slow one counts as no verdict. */
export const PROBE_TIMEOUT_MS = 15_000;

/**
 * One CONNECT to the destination through the instance the supervisor names, hung up at once:
 * no byte of the client's request is sent. The supervisor uses the answer to tell whether a
 * refusal was the destination's doing or the exit's (supervisor/verdicts/destination-blame.ts).
 */
export async function probeDestination(p: DestinationProbe): Promise<DestinationProbeResult> {
  // Destinations are written `host:port`, IPv6 literals bracketed (dial-failure.ts, destinationOf).
  const target = targetFromHost(p.host.replace(/^\[(.*)\]$/, '$1'), p.port);
  try {
    const dialed = await dialSocks5({
      ...p.socks,
      target,
      timeoutMs: PROBE_TIMEOUT_MS,
    });
    dialed.socket.destroy();
    return { ok: true, socksReply: null };
  } catch (error) {
    if (error instanceof SocksDialError && error.kind === 'refused') return { ok: false, socksReply: error.replyCode };
    return { ok: false, socksReply: null };
  }
}
