import type { TorControlClient } from './control-client.js';
import type { DelayScope } from './delay-scope.js';

/**
 * Missed liveness probes in a row before a ready tor counts as unresponsive: one slow answer on a
 * loaded machine is not a frozen tor.
 */
export const LIVENESS_MISSES = 2;

export interface LivenessTiming {
  intervalMs: number;
  timeoutMs: number;
  /** Unresponsive for this long: the host restarts the tor. */
  restartMs: number;
}

/** What the probe needs of the instance it watches. */
export interface LivenessHost {
  /** Its waits: cancelling them (stop, restart, death) ends the probe. */
  readonly delays: DelayScope;
  /** false once the process this probe was started for is gone. */
  isCurrent(): boolean;
  client(): TorControlClient | undefined;
  unresponsive(silentForMs: number): void;
  responsive(): void;
  /** Unresponsive for LivenessTiming.restartMs; the probe ends here. */
  unresponsiveTooLong(silentForMs: number): void;
}

/**
 * While one tor process lives: asks it something trivial on the control port at an interval. A
 * frozen tor (SIGSTOP, a hung main loop) still accepts TCP connections on its SocksPort, so
 * without this every request routed to it would wait out the dial deadline. Runs off the request
 * path.
 */
export async function probeLiveness(host: LivenessHost, timing: LivenessTiming): Promise<void> {
  let misses = 0;
  let lastAnswerAt = Date.now();
  let responsive = true;
  while (await host.delays.wait(timing.intervalMs)) {
    if (!host.isCurrent()) return;
    const client = host.client();
    let answered = false;
    if (client?.connected) {
      try {
        // Any reply, even an error status, proves the main loop runs.
        await client.request('GETINFO version', timing.timeoutMs);
        answered = true;
      } catch {
        // Silent or disconnected: a miss. (A command timeout also resets the control connection.)
      }
    } else {
      // No control connection to ask: waiting for a reconnection is a miss too.
      await host.delays.wait(timing.timeoutMs);
    }
    if (!host.isCurrent()) return;
    if (answered) {
      misses = 0;
      lastAnswerAt = Date.now();
      if (!responsive) {
        responsive = true;
        host.responsive();
      }
      continue;
    }
    misses++;
    const silentForMs = Date.now() - lastAnswerAt;
    if (misses === LIVENESS_MISSES) {
      responsive = false;
      host.unresponsive(silentForMs);
    }
    if (!responsive && silentForMs >= timing.restartMs) {
      host.unresponsiveTooLong(silentForMs);
      return;
    }
  }
}
