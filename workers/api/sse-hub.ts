import type { Response } from 'express';

/** Comment line sent to idle subscribers so proxies and browsers keep the stream open. */
export const SSE_HEARTBEAT_MS = 15_000;
/** A subscriber whose socket stayed congested this long is disconnected (it reconnects). */
export const SSE_STALL_LIMIT_MS = 30_000;

export interface SseHubOptions {
  heartbeatMs?: number;
  stallLimitMs?: number;
}

/**
 * The credential a stream was opened with, as far as its end matters: a token (the stream ends
 * when it is revoked) and an expiry (the sign-in behind a session credential or a ticket).
 */
export interface StreamCredential {
  tokenId?: string;
  /** Epoch ms. */
  expiresAt?: number;
}

/** Why a stream was ended by the server; sent in the final `signed-out` event. */
export type StreamEndReason = 'revoked' | 'expired';

/** setTimeout's longest delay; a longer sign-in is re-checked when it fires. */
const MAX_TIMER_MS = 2 ** 31 - 1;

interface Subscriber {
  res: Response;
  /** Set while the socket's buffer is full: frames are dropped, never queued. */
  congestedSince: number | null;
  credential: StreamCredential;
  expiry: NodeJS.Timeout | null;
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

  subscribe(res: Response, initial: string[], credential: StreamCredential = {}): void {
    res.status(200);
    res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
    res.setHeader('Cache-Control', 'no-cache, no-transform');
    res.setHeader('X-Accel-Buffering', 'no');
    res.setHeader('Connection', 'keep-alive');
    res.flushHeaders();
    res.socket?.setNoDelay(true);
    const sub: Subscriber = { res, congestedSince: null, credential, expiry: null };
    this.subscribers.add(sub);
    this.scheduleExpiry(sub);
    res.write('retry: 2000\n\n');
    for (const frame of initial) res.write(frame);
    res.on('drain', () => {
      sub.congestedSince = null;
    });
    res.on('close', () => this.forget(sub));
  }

  /**
   * Ends every stream opened with a token that `stillValid` no longer holds (the credential
   * snapshot without a revoked token). Called before the new snapshot is acknowledged, so a
   * revocation answers only once the streams it ends have received their last event.
   */
  endRevoked(stillValid: (tokenId: string) => boolean): number {
    let ended = 0;
    for (const s of [...this.subscribers]) {
      if (s.credential.tokenId !== undefined && !stillValid(s.credential.tokenId)) {
        this.end(s, 'revoked');
        ended++;
      }
    }
    return ended;
  }

  private scheduleExpiry(sub: Subscriber): void {
    const at = sub.credential.expiresAt;
    if (at === undefined) return;
    const delay = at - Date.now();
    if (delay <= 0) {
      this.end(sub, 'expired');
      return;
    }
    sub.expiry = setTimeout(() => {
      sub.expiry = null;
      this.scheduleExpiry(sub);
    }, Math.min(delay, MAX_TIMER_MS));
    sub.expiry.unref();
  }

  /** The last event (the dashboard signs out on it), then the end of the response. */
  private end(sub: Subscriber, reason: StreamEndReason): void {
    if (!this.subscribers.has(sub)) return;
    this.forget(sub);
    if (!sub.res.writableEnded) sub.res.end(SseHub.frame('signed-out', { reason }));
  }

  private forget(sub: Subscriber): void {
    if (sub.expiry !== null) clearTimeout(sub.expiry);
    sub.expiry = null;
    this.subscribers.delete(sub);
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
    for (const s of [...this.subscribers]) {
      this.forget(s);
      s.res.end();
    }
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
