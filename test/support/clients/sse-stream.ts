import { createParser } from 'eventsource-parser';
import http from 'node:http';

export interface Frame {
  event: string | undefined;
  data: string;
}

/** An SSE client on its own socket, parsing frames as they arrive. */
export class StreamClient {
  readonly frames: Frame[] = [];
  retry: number | null = null;
  comments = 0;
  ended = false;

  private constructor(
    readonly status: number,
    readonly headers: http.IncomingHttpHeaders,
    private readonly req: http.ClientRequest,
  ) {}

  static open(base: string, path: string, headers: Record<string, string> = {}): Promise<StreamClient> {
    return new Promise((resolve, reject) => {
      const req = http.get(base + path, { headers, agent: false }, (res) => {
        const client = new StreamClient(res.statusCode ?? 0, res.headers, req);
        const parser = createParser({
          onEvent: (e) => client.frames.push({ event: e.event, data: e.data }),
          onRetry: (ms) => {
            client.retry = ms;
          },
          onComment: () => {
            client.comments += 1;
          },
        });
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => parser.feed(chunk));
        res.on('close', () => {
          client.ended = true;
        });
        resolve(client);
      });
      req.on('error', reject);
    });
  }

  of(event: string): unknown[] {
    return this.frames.filter((f) => f.event === event).map((f) => JSON.parse(f.data) as unknown);
  }

  async waitFor(condition: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!condition()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  close(): void {
    this.req.destroy();
  }
}

