/**
 * A live-stream subscriber that reconnects the way a browser's EventSource does: fetch, the body
 * fed to eventsource-parser, and on the end of the stream (or a refused connection) a new attempt
 * after the server's `retry:` delay. Frames remember which connection brought them, so a test can
 * ask for a `state` frame that arrived over a connection opened after a fault.
 */
import { createParser, type EventSourceMessage } from 'eventsource-parser';

export interface ReconnectingFrame {
  event: string;
  data: unknown;
  /** 1 for the first successful connection, 2 after the first reconnect, … */
  connection: number;
  at: number;
}

export class ReconnectingStream {
  readonly frames: ReconnectingFrame[] = [];
  /** Successful (200) connections so far. */
  connections = 0;
  /** Attempts that failed (refused connection, non-200 answer). */
  failedAttempts = 0;
  private retryMs = 1000;
  private closed = false;
  private abort: AbortController | null = null;
  private readonly loop: Promise<void>;
  private sleepTimer: NodeJS.Timeout | null = null;
  private wakeSleep: (() => void) | null = null;

  constructor(
    private readonly url: string,
    private readonly headers: Record<string, string>,
  ) {
    this.loop = this.run();
  }

  private async run(): Promise<void> {
    while (!this.closed) {
      this.abort = new AbortController();
      try {
        const res = await fetch(this.url, { headers: { Accept: 'text/event-stream', ...this.headers }, signal: this.abort.signal });
        if (res.status !== 200 || res.body === null) {
          this.failedAttempts += 1;
          await res.body?.cancel();
        } else {
          const connection = ++this.connections;
          const parser = createParser({
            onEvent: (m: EventSourceMessage) => {
              this.frames.push({ event: m.event ?? 'message', data: JSON.parse(m.data) as unknown, connection, at: Date.now() });
            },
            onRetry: (ms: number) => {
              this.retryMs = ms;
            },
          });
          const decoder = new TextDecoder();
          for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) parser.feed(decoder.decode(chunk, { stream: true }));
        }
      } catch {
        // refused, reset or aborted: reconnect below unless closed
        if (!this.closed) this.failedAttempts += 1;
      }
      if (this.closed) return;
      await new Promise<void>((resolve) => {
        this.wakeSleep = resolve;
        this.sleepTimer = setTimeout(resolve, this.retryMs);
      });
    }
  }

  /** Resolves with the first frame matching `match` from a connection numbered `minConnection` or later. */
  async waitFor(match: (f: ReconnectingFrame) => boolean, minConnection: number, timeoutMs: number): Promise<ReconnectingFrame> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const f = this.frames.find((x) => x.connection >= minConnection && match(x));
      if (f) return f;
      if (Date.now() > deadline) {
        throw new Error(
          `no matching stream frame on connection >= ${minConnection} within ${timeoutMs} ms ` +
            `(connections ${this.connections}, failed attempts ${this.failedAttempts}, frames ${this.frames.length})`,
        );
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    this.abort?.abort();
    if (this.sleepTimer) clearTimeout(this.sleepTimer);
    this.wakeSleep?.();
    await this.loop;
  }
}
