import type { Response } from 'express';

/** Comment line sent to idle subscribers so proxies and browsers keep the stream open. */
export const SSE_HEARTBEAT_MS = 15_000;
/** A subscriber whose socket stayed congested this long is disconnected (it reconnects). */
export const SSE_STALL_LIMIT_MS = 30_000;

export interface SseHubOptions {
  heartbeatMs?: number;
  stallLimitMs?: number;
}

interface Subscriber {
  res: Response;
  /** Set while the socket's buffer is full: frames are dropped, never queued. */
  congestedSince: number | null;
}

/**
 * Fans the supervisor's state snapshots and audit events out to the stream's subscribers.
 * Each frame is serialised once. A subscriber that cannot keep up loses frames (its socket
 * buffer is full, so writing more would only grow memory) and never slows anyone else.
 */
export class SseHub {
  private readonly subscribers = new Set<Subscriber>();
  private readonly heartbeat: NodeJS.Timeout;
  private readonly stallLimitMs: number;
  dropped = 0;

  constructor(options: SseHubOptions = {}) {
    this.stallLimitMs = options.stallLimitMs ?? SSE_STALL_LIMIT_MS;
    this.heartbeat = setInterval(() => this.broadcastRaw(': keep-alive\n\n'), options.heartbeatMs ?? SSE_HEARTBEAT_MS);
    this.heartbeat.unref();
  }

  get size(): number {
    return this.subscribers.size;
  }

  subscribe(res: Response, initial: string[]): void {
    res.status(200);
    res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
    res.setHeader('Cache-Control', 'no-cache, no-transform');
    res.setHeader('X-Accel-Buffering', 'no');
    res.setHeader('Connection', 'keep-alive');
    res.flushHeaders();
    res.socket?.setNoDelay(true);
    const sub: Subscriber = { res, congestedSince: null };
    this.subscribers.add(sub);
    res.write('retry: 2000\n\n');
    for (const frame of initial) res.write(frame);
    res.on('drain', () => {
      sub.congestedSince = null;
    });
    res.on('close', () => this.subscribers.delete(sub));
  }

  /** `data` is JSON-encoded; one line, since JSON.stringify never emits a raw newline. */
  publish(event: string, data: unknown): void {
    this.broadcastRaw(SseHub.frame(event, data));
  }

  static frame(event: string, data: unknown): string {
    return `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
  }

  close(): void {
    clearInterval(this.heartbeat);
    for (const s of this.subscribers) s.res.end();
    this.subscribers.clear();
  }

  private broadcastRaw(frame: string): void {
    const now = Date.now();
    for (const s of this.subscribers) {
      if (s.congestedSince !== null) {
        this.dropped += 1;
        if (now - s.congestedSince > this.stallLimitMs) s.res.destroy();
        continue;
      }
      if (!s.res.write(frame)) s.congestedSince = now;
    }
  }
}
