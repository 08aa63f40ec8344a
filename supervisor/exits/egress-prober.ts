import type { EgressFetch, EgressFetchFailure, EgressFetchResult } from '../../shared/ipc/protocol.js';
import { MAX_ECHO_ANSWER_BYTES, readEgressAnswer } from './egress-answer.js';

/** A proxy worker's GET through an instance (WorkerPort.fetchThroughInstance); null when no worker can. */
export type FetchThroughInstance = (fetch: EgressFetch) => Promise<EgressFetchResult | null>;

/** An instance's SocksPort, as a proxy worker dials it. */
export interface ProbeRoute {
  host: string;
  port: number;
  path?: string;
}

/** Probes running at once; more wait their turn (within their own deadline). */
export const MAX_CONCURRENT_EGRESS_PROBES = 4;

/**
 * What one probe found: the address the echo service saw, or why there is none. `exit: false`
 * failures say nothing about the exit: no worker to ask, no turn within the deadline, or the
 * instance's own SocksPort did not answer (the tor process, not its exit).
 */
export type ProbeOutcome =
  | { ok: true; address: string; url: string; tookMs: number }
  | { ok: false; aboutExit: boolean; failure: EgressFetchFailure | 'answer' | 'no_worker' | 'busy'; detail: string; tookMs: number };

/**
 * Measures the address an exit's traffic leaves from: one GET through the instance pinned to it
 * to each IP-echo URL in turn (EGRESS_PROBE_URLS) until one answers with an address, all within
 * EGRESS_PROBE_TIMEOUT. At most MAX_CONCURRENT_EGRESS_PROBES run at once.
 */
export class EgressProber {
  private running = 0;
  private readonly queue: (() => void)[] = [];

  constructor(
    private readonly urls: readonly string[],
    private readonly timeoutMs: number,
    private readonly fetch: FetchThroughInstance,
  ) {}

  get enabled(): boolean {
    return this.urls.length > 0;
  }

  async probe(route: ProbeRoute): Promise<ProbeOutcome> {
    const startedAt = performance.now();
    const left = (): number => this.timeoutMs - (performance.now() - startedAt);
    const took = (): number => Math.round(performance.now() - startedAt);
    if (!(await this.turn(left()))) return { ok: false, aboutExit: false, failure: 'busy', detail: `no turn among ${MAX_CONCURRENT_EGRESS_PROBES} probes within ${this.timeoutMs} ms`, tookMs: took() };
    try {
      let last: ProbeOutcome | undefined;
      for (const url of this.urls) {
        const timeoutMs = Math.floor(left());
        if (timeoutMs < 1) break;
        const result = await this.fetch({ socks: route, url, timeoutMs, maxBytes: MAX_ECHO_ANSWER_BYTES });
        if (result === null) return { ok: false, aboutExit: false, failure: 'no_worker', detail: 'no proxy worker answered', tookMs: took() };
        if (!result.ok) {
          // The instance's own SocksPort did not answer: every URL would fail the same way, and the exit is not to blame.
          if (result.failure === 'dial') return { ok: false, aboutExit: false, failure: 'dial', detail: result.detail, tookMs: took() };
          last = { ok: false, aboutExit: true, failure: result.failure, detail: `${url}: ${result.detail}`, tookMs: took() };
          continue;
        }
        const answer = readEgressAnswer(result.body);
        if (answer.ok) return { ok: true, address: answer.address, url, tookMs: took() };
        last = { ok: false, aboutExit: true, failure: 'answer', detail: `${url}: ${answer.why}`, tookMs: took() };
      }
      return last ?? { ok: false, aboutExit: true, failure: 'timeout', detail: `no answer within ${this.timeoutMs} ms`, tookMs: took() };
    } finally {
      this.release();
    }
  }

  /** Waits for a free slot, at most `waitMs`; false when none came. */
  private turn(waitMs: number): Promise<boolean> {
    if (this.running < MAX_CONCURRENT_EGRESS_PROBES) {
      this.running++;
      return Promise.resolve(true);
    }
    return new Promise((resolve) => {
      const go = (): void => {
        clearTimeout(timer);
        this.running++;
        resolve(true);
      };
      const timer = setTimeout(() => {
        const at = this.queue.indexOf(go);
        if (at >= 0) this.queue.splice(at, 1);
        resolve(false);
      }, Math.max(0, waitMs));
      timer.unref();
      this.queue.push(go);
    });
  }

  private release(): void {
    this.running--;
    this.queue.shift()?.();
  }
}
