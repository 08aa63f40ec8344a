/**
 * A raw byte tunnel between a client and a dialled instance (SOCKS5 CONNECT and HTTP CONNECT).
 * Each direction is a pump of two listeners: a chunk read is written to the other side, and a
 * write the other side cannot take at once pauses the reading side until that side drains, so
 * nothing is buffered beyond the streams' high-water marks. That is what `pipe()` does, but
 * `pipe()` makes a dozen closures and listeners per direction and per connection, which on
 * short proxied requests was the largest single source of the worker's garbage
 * (docs/performance.md, "Next to the peers"). Both sockets are allowHalfOpen, so one side's FIN
 * is passed on and the other direction keeps flowing until it ends too. Byte counts come from
 * the upstream socket's own counters, and the idle timeout from a shared sweeper reading the same
 * counters (idle-sweeper.ts), so the hot path carries no per-chunk work of ours beyond the write.
 */
import type net from 'node:net';
import type { TransportFailureRecord } from '../../shared/ipc/protocol.js';
import type { DialedUpstream } from './socks5-client.js';
import { idleSweeperFor, type IdleSweeper, type IdleWatched } from './idle-sweeper.js';

export interface TunnelResult {
  bytesUp: number;
  bytesDown: number;
  /** Set when the upstream broke the tunnel (error or reset); a client reset or idle close is not a failure. */
  failure: TransportFailureRecord | null;
  /**
   * When the last byte from the destination was passed to the client (Date.now()), or, if none
   * was, when the first side finished. A client reporting what it saw reports after this, while
   * the close itself can reach us later (a round trip through tor, or a busy event loop).
   */
  endedAt: number;
}

export class Tunnel implements IdleWatched {
  private clientClosed = false;
  private upstreamClosed = false;
  private failure: TransportFailureRecord | null = null;
  private finished = false;
  private firstEndAt: number | null = null;
  private lastDownAt: number | null = null;
  /** Set when we end the tunnel ourselves, so the resulting upstream errors are not blamed on the instance. */
  private tearingDown = false;
  private readonly upstream: net.Socket;
  private readonly sweeper: IdleSweeper;

  constructor(
    private readonly client: net.Socket,
    private readonly dialed: DialedUpstream,
    idleTimeoutMs: number,
    /**
     * Bytes the client sent before the tunnel existed (after its SOCKS request or CONNECT head).
     * They are written upstream first instead of being unshifted into the client socket, because
     * a client that already half-closed cannot take bytes back (unshift after 'end' throws).
     */
    private readonly initialUpload: Buffer,
    private readonly onEnd: (result: TunnelResult) => void,
  ) {
    this.upstream = dialed.socket;
    this.sweeper = idleSweeperFor(idleTimeoutMs);
  }

  start(): void {
    const { client, upstream } = this;
    client.on('error', this.onClientError);
    upstream.on('error', this.onUpstreamError);
    client.on('close', this.onClientClose);
    upstream.on('close', this.onUpstreamClose);
    client.once('end', this.onClientEnd);
    upstream.once('end', this.onUpstreamEnd);
    client.on('data', this.onUpload);
    upstream.on('data', this.onDownload);
    client.on('drain', this.onClientDrain);
    upstream.on('drain', this.onUpstreamDrain);
    this.sweeper.watch(this);
    if (this.initialUpload.length > 0) upstream.write(this.initialUpload);
    // Both sides were paused until now (the handshake's backpressure, the dial's unshifted bytes).
    client.resume();
    upstream.resume();
    // A side whose 'end' was emitted before these listeners existed has nothing more to send.
    if (client.readableEnded) this.onClientEnd();
    if (upstream.readableEnded) this.onUpstreamEnd();
    if (client.destroyed) this.onClientClose();
    if (upstream.destroyed) this.onUpstreamClose();
  }

  /** Ends both sides now (shutdown). */
  destroy(): void {
    this.tearingDown = true;
    this.client.destroy();
    this.upstream.destroy();
  }

  private readonly onClientError = (): void => {
    // The client's own trouble, not the instance's: tear down without recording a failure.
    this.tearingDown = true;
    this.upstream.destroy();
  };

  private readonly onUpstreamError = (): void => {
    if (!this.tearingDown) this.failure ??= { kind: 'reset', scored: true };
    // Pass the break on as a reset, so the client does not mistake it for a clean end of data.
    if (!this.client.destroyed) this.client.resetAndDestroy();
  };

  /** IdleWatched: every byte either way passes the upstream socket, whose counters also give the accounting. */
  activity(): number {
    return this.upstream.bytesRead + this.upstream.bytesWritten;
  }

  /** IdleWatched: no traffic for the idle timeout, which is nobody's failure. */
  expire(): void {
    this.destroy();
  }

  /** Client → instance. A side being torn down takes nothing more (its close handler ends the other). */
  private readonly onUpload = (chunk: Buffer): void => {
    if (this.upstream.destroyed) return;
    if (!this.upstream.write(chunk)) this.client.pause();
  };

  /** Instance → client. */
  private readonly onDownload = (chunk: Buffer): void => {
    this.lastDownAt = Date.now();
    if (this.client.destroyed) return;
    if (!this.client.write(chunk)) this.upstream.pause();
  };

  private readonly onUpstreamDrain = (): void => {
    if (!this.client.destroyed) this.client.resume();
  };

  private readonly onClientDrain = (): void => {
    if (!this.upstream.destroyed) this.upstream.resume();
  };

  /** The client's FIN: passed on to the instance, whose direction keeps flowing (allowHalfOpen). */
  private readonly onClientEnd = (): void => {
    this.onSideEnded();
    if (!this.upstream.destroyed && !this.upstream.writableEnded) this.upstream.end();
  };

  private readonly onUpstreamEnd = (): void => {
    this.onSideEnded();
    if (!this.client.destroyed && !this.client.writableEnded) this.client.end();
  };

  private onSideEnded(): void {
    this.firstEndAt ??= Date.now();
  }

  private readonly onClientClose = (): void => {
    this.onSideEnded();
    if (this.clientClosed) return;
    this.clientClosed = true;
    // A client that closed with both directions done leaves the upstream to finish flushing and
    // close by itself; one that vanished mid-stream takes the upstream with it.
    if (!this.upstreamClosed && (!this.client.readableEnded || !this.client.writableFinished)) {
      this.tearingDown = true;
      this.upstream.destroy();
    }
    this.maybeFinish();
  };

  private readonly onUpstreamClose = (): void => {
    this.onSideEnded();
    if (this.upstreamClosed) return;
    this.upstreamClosed = true;
    if (!this.clientClosed && (!this.upstream.readableEnded || !this.upstream.writableFinished)) {
      if (!this.client.destroyed) this.client.resetAndDestroy();
    }
    this.maybeFinish();
  };

  private maybeFinish(): void {
    if (this.finished || !this.clientClosed || !this.upstreamClosed) return;
    this.finished = true;
    this.sweeper.unwatch(this);
    this.onEnd({
      bytesUp: this.upstream.bytesWritten - this.dialed.writeBase,
      bytesDown: this.upstream.bytesRead - this.dialed.readBase,
      failure: this.failure,
      endedAt: this.lastDownAt ?? this.firstEndAt ?? Date.now(),
    });
  }
}
