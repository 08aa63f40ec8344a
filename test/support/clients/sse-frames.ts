import { createParser, type EventSourceMessage } from 'eventsource-parser';

export interface StreamFrame {
  event: string;
  data: unknown;
  /** Date.now() when the frame was parsed. */
  at: number;
}

export class StreamRefusedError extends Error {
  constructor(readonly status: number, body: string) {
    super(`stream refused with ${status}: ${body.trim()}`);
    this.name = 'StreamRefusedError';
  }
}

export class StreamWaitTimeoutError extends Error {
  constructor(what: string, timeoutMs: number, seen: number) {
    super(`no stream frame ${what} within ${timeoutMs} ms (${seen} frames seen)`);
    this.name = 'StreamWaitTimeoutError';
  }
}

/**
 * A live-stream subscriber the way a browser's EventSource would be one: fetch with the ticket
 * in the query, the body fed to eventsource-parser. Keeps every frame; close() aborts the fetch.
 */
export class StreamClient {
  readonly frames: StreamFrame[] = [];
  readonly contentType: string;
  private readonly abort: AbortController;
  private readonly waiters = new Set<() => void>();
  private readonly pump: Promise<void>;

  private constructor(res: Response, abort: AbortController) {
    this.abort = abort;
    this.contentType = res.headers.get('content-type') ?? '';
    const parser = createParser({
      onEvent: (m: EventSourceMessage) => {
        this.frames.push({ event: m.event ?? 'message', data: JSON.parse(m.data) as unknown, at: Date.now() });
        for (const wake of this.waiters) wake();
      },
    });
    this.pump = (async () => {
      const decoder = new TextDecoder();
      try {
        for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) parser.feed(decoder.decode(chunk, { stream: true }));
      } catch {
        // aborted by close()
      }
    })();
  }

  static async open(url: string, headers: Record<string, string> = {}): Promise<StreamClient> {
    const abort = new AbortController();
    const res = await fetch(url, { headers: { Accept: 'text/event-stream', ...headers }, signal: abort.signal });
    if (res.status !== 200) {
      const body = await res.text();
      throw new StreamRefusedError(res.status, body);
    }
    return new StreamClient(res, abort);
  }

  /** Resolves with the first frame (already seen or future, from index `from`) that matches. */
  waitFor(what: string, match: (f: StreamFrame) => boolean, timeoutMs: number, from = 0): Promise<StreamFrame> {
    return new Promise((resolve, reject) => {
      let scanned = from;
      const check = (): boolean => {
        for (; scanned < this.frames.length; scanned++) {
          const f = this.frames[scanned] as StreamFrame;
          if (match(f)) {
            finish();
            resolve(f);
            return true;
          }
        }
        return false;
      };
      const timer = setTimeout(() => {
        finish();
        reject(new StreamWaitTimeoutError(what, timeoutMs, this.frames.length));
      }, timeoutMs);
      const wake = (): void => void check();
      const finish = (): void => {
        clearTimeout(timer);
        this.waiters.delete(wake);
      };
      if (!check()) this.waiters.add(wake);
    });
  }

  async close(): Promise<void> {
    this.abort.abort();
    await this.pump;
  }
}
