/**
 * One plain (absolute-URI) HTTP request forwarded over its own upstream connection through an
 * instance: the request head rewritten, the body forwarded verbatim by its framing, the response
 * relayed with its framing so that the client connection can carry the next request. Every copy
 * step respects backpressure: a full destination pauses its source.
 */
import type net from 'node:net';
import { ChunkedBodyScanner } from './chunked-body-scanner.js';
import { serializeErrorResponse, type ProxyErrorResponse } from './http-proxy-errors.js';
import { buildUpstreamRequestHead, type ProxyRequestHead } from './http-proxy-head.js';
import {
  buildClientResponseHead,
  parseResponseHead,
  responseFraming,
  ResponseHeadError,
  type ResponseFraming,
} from './http-response-head.js';
import type { TransportFailureRecord } from '../../shared/ipc/protocol.js';
import type { DialedUpstream } from './socks5-client.js';

export interface ExchangeOutcome {
  bytesUp: number;
  bytesDown: number;
  failure: TransportFailureRecord | null;
  /** The client connection is in a clean state and may carry another request. */
  reusable: boolean;
  /** The client connection was already destroyed (reset) by the exchange. */
  clientDestroyed: boolean;
  /** Bytes the client sent after this request's body: the start of its next request. */
  leftover: Buffer;
  /** The exchange ended with a proxy-generated error response (for logging). */
  proxyError: ProxyErrorResponse | null;
}

const EMPTY = Buffer.alloc(0);

function ignoreError(): void {
  // A destroyed socket may still report the error that destroyed it; nothing is left to do.
}

export class PlainHttpExchange {
  private readonly upstream: net.Socket;
  private requestBodyDone = false;
  private requestBodyRemaining = 0;
  private requestChunks: ChunkedBodyScanner | null = null;
  private leftover: Buffer = EMPTY;

  private responsePhase: 'head' | 'body' | 'done' = 'head';
  private responseBuffer: Buffer = EMPTY;
  private responseScannedTo = 0;
  private framing: ResponseFraming = { kind: 'none' };
  private responseRemaining = 0;
  private responseChunks: ChunkedBodyScanner | null = null;
  private keepAliveToClient = false;

  private waitingForUpstreamDrain = false;
  private waitingForClientDrain = false;
  private finished = false;

  constructor(
    private readonly client: net.Socket,
    private readonly dialed: DialedUpstream,
    private readonly head: ProxyRequestHead,
    private readonly bodyStart: Buffer,
    private readonly idleTimeoutMs: number,
    private readonly onDone: (outcome: ExchangeOutcome) => void,
    /** Fields the proxy adds to the response head (EXIT_HEADER). */
    private readonly extraResponseFields: readonly string[] = [],
  ) {
    this.upstream = dialed.socket;
  }

  start(): void {
    const { upstream, client, head } = this;
    upstream.on('data', this.onUpstreamData);
    upstream.on('end', this.onUpstreamEnd);
    upstream.on('error', this.onUpstreamError);
    upstream.on('close', this.onUpstreamClose);
    upstream.setTimeout(this.idleTimeoutMs, this.onIdle);
    client.setTimeout(this.idleTimeoutMs, this.onIdle);
    upstream.write(buildUpstreamRequestHead(head), 'latin1');

    switch (head.framing.kind) {
      case 'none':
        this.requestBodyDone = true;
        break;
      case 'length':
        this.requestBodyRemaining = head.framing.length;
        break;
      case 'chunked':
        this.requestChunks = new ChunkedBodyScanner();
        break;
    }
    if (this.bodyStart.length > 0) this.forwardRequestBytes(this.bodyStart);
    if (!this.requestBodyDone && !this.finished && client.readableEnded) {
      // The client sent part of a body and half-closed before the upstream was ready.
      this.finish({ failure: null, reusable: false, clientDestroyed: true, proxyError: null });
      return;
    }
    if (!this.requestBodyDone && !this.finished) {
      client.on('data', this.onClientData);
      client.on('end', this.onClientEnd);
      client.resume();
    }
    upstream.resume();
  }

  /** The client went away or the listener shuts down. */
  abort(): void {
    if (this.finished) return;
    this.finish({ failure: null, reusable: false, clientDestroyed: true, proxyError: null });
  }

  // --- request body: client -> upstream ------------------------------------------------------

  private readonly onClientData = (chunk: Buffer): void => {
    if (this.requestBodyDone) {
      this.leftover = this.leftover.length === 0 ? chunk : Buffer.concat([this.leftover, chunk]);
      return;
    }
    this.forwardRequestBytes(chunk);
  };

  private forwardRequestBytes(chunk: Buffer): void {
    let bodyBytes: number;
    if (this.requestChunks !== null) {
      const end = this.requestChunks.scan(chunk);
      if (end === -1) {
        this.requestBodyError();
        return;
      }
      bodyBytes = end;
      if (this.requestChunks.done) this.requestBodyDone = true;
    } else {
      bodyBytes = Math.min(this.requestBodyRemaining, chunk.length);
      this.requestBodyRemaining -= bodyBytes;
      if (this.requestBodyRemaining === 0) this.requestBodyDone = true;
    }
    if (bodyBytes > 0) {
      const writable = this.upstream.write(bodyBytes === chunk.length ? chunk : chunk.subarray(0, bodyBytes));
      if (!writable && !this.requestBodyDone && !this.waitingForUpstreamDrain) {
        this.waitingForUpstreamDrain = true;
        this.client.pause();
        this.upstream.once('drain', this.onUpstreamDrain);
      }
    }
    if (this.requestBodyDone) {
      this.stopReadingClient();
      if (bodyBytes < chunk.length) {
        const rest = chunk.subarray(bodyBytes);
        this.leftover = this.leftover.length === 0 ? rest : Buffer.concat([this.leftover, rest]);
      }
      if (this.responsePhase === 'done') this.completeIfPossible();
    }
  }

  private readonly onUpstreamDrain = (): void => {
    this.waitingForUpstreamDrain = false;
    if (!this.requestBodyDone && !this.finished) this.client.resume();
  };

  private stopReadingClient(): void {
    this.client.pause();
    this.client.removeListener('data', this.onClientData);
    this.client.removeListener('end', this.onClientEnd);
  }

  private readonly onClientEnd = (): void => {
    // The client half-closed in the middle of its own body: the request can never complete.
    if (!this.requestBodyDone) this.finish({ failure: null, reusable: false, clientDestroyed: true, proxyError: null });
  };

  private requestBodyError(): void {
    if (this.responsePhase === 'head') {
      this.respondWithError({ status: 400, error: 'http_request_error', message: 'malformed chunked request body' }, null);
    } else {
      this.finish({ failure: null, reusable: false, clientDestroyed: true, proxyError: null });
    }
  }

  // --- response: upstream -> client ----------------------------------------------------------

  private readonly onUpstreamData = (chunk: Buffer): void => {
    if (this.responsePhase === 'body') {
      this.relayResponseBody(chunk);
      return;
    }
    if (this.responsePhase === 'done') return; // bytes after the response: the origin ignored Connection: close
    this.responseBuffer = this.responseBuffer.length === 0 ? chunk : Buffer.concat([this.responseBuffer, chunk]);
    this.readResponseHeads();
  };

  private readResponseHeads(): void {
    for (;;) {
      const parsed = parseResponseHead(this.responseBuffer, this.responseScannedTo);
      if (parsed.status === 'need-more') {
        this.responseScannedTo = parsed.scannedTo;
        return;
      }
      if (parsed.status === 'error') {
        const tooLarge = parsed.error.code === 'head-too-large';
        this.respondWithError(
          {
            status: 502,
            error: tooLarge ? 'http_response_header_section_size' : 'http_protocol_error',
            message: tooLarge ? 'response head from the destination too large' : 'malformed response from the destination',
          },
          null,
        );
        return;
      }
      const { head, consumed } = parsed;
      const raw = this.responseBuffer.subarray(0, consumed);
      this.responseBuffer = this.responseBuffer.subarray(consumed);
      this.responseScannedTo = 0;
      if (head.status === 101) {
        this.respondWithError({ status: 502, error: 'http_protocol_error', message: 'destination switched protocols without an Upgrade request' }, null);
        return;
      }
      if (head.status < 200) {
        // Interim responses (100 Continue, 103 Early Hints) pass through to HTTP/1.1 clients.
        if (this.head.version === '1.1') this.client.write(raw);
        continue;
      }
      const framing = responseFraming(head, this.head.method);
      if (framing instanceof ResponseHeadError) {
        this.respondWithError({ status: 502, error: 'http_protocol_error', message: framing.message }, null);
        return;
      }
      this.framing = framing;
      this.keepAliveToClient = this.head.keepAlive && framing.kind !== 'until-close';
      this.client.write(buildClientResponseHead(head, this.head.version, this.keepAliveToClient, this.extraResponseFields), 'latin1');
      this.responsePhase = 'body';
      if (framing.kind === 'length') this.responseRemaining = framing.length;
      if (framing.kind === 'chunked') this.responseChunks = new ChunkedBodyScanner();
      if (framing.kind === 'none') {
        this.responseComplete();
        return;
      }
      const rest = this.responseBuffer;
      this.responseBuffer = EMPTY;
      if (rest.length > 0) this.relayResponseBody(rest);
      return;
    }
  }

  private relayResponseBody(chunk: Buffer): void {
    let bodyBytes = chunk.length;
    let complete = false;
    switch (this.framing.kind) {
      case 'length':
        bodyBytes = Math.min(this.responseRemaining, chunk.length);
        this.responseRemaining -= bodyBytes;
        complete = this.responseRemaining === 0;
        break;
      case 'chunked': {
        const scanner = this.responseChunks!;
        const end = scanner.scan(chunk);
        if (end === -1) {
          // Part of the response is already with the client: only a reset can say it is broken.
          this.finish({ failure: null, reusable: false, clientDestroyed: true, proxyError: null });
          return;
        }
        bodyBytes = end;
        complete = scanner.done;
        break;
      }
      default:
        break;
    }
    if (bodyBytes > 0) {
      const writable = this.client.write(bodyBytes === chunk.length ? chunk : chunk.subarray(0, bodyBytes));
      if (!writable && !complete && !this.waitingForClientDrain) {
        this.waitingForClientDrain = true;
        this.upstream.pause();
        this.client.once('drain', this.onClientDrain);
      }
    }
    if (complete) this.responseComplete();
  }

  private readonly onClientDrain = (): void => {
    this.waitingForClientDrain = false;
    if (!this.finished) this.upstream.resume();
  };

  private responseComplete(): void {
    this.responsePhase = 'done';
    this.completeIfPossible();
  }

  private completeIfPossible(): void {
    if (this.finished || this.responsePhase !== 'done') return;
    if (this.requestBodyDone) {
      this.finish({ failure: null, reusable: this.keepAliveToClient, clientDestroyed: false, proxyError: null });
    } else {
      // The origin answered before the body was complete: the rest of the body can never be
      // told apart from a next request, so the connection ends here.
      this.finish({ failure: null, reusable: false, clientDestroyed: false, proxyError: null });
    }
  }

  private readonly onUpstreamEnd = (): void => {
    if (this.finished) return;
    if (this.responsePhase === 'body' && this.framing.kind === 'until-close') {
      this.responseComplete();
      return;
    }
    this.upstreamBroke();
  };

  private readonly onUpstreamError = (): void => {
    if (!this.finished) this.upstreamBroke();
  };

  private readonly onUpstreamClose = (): void => {
    if (!this.finished) this.upstreamBroke();
  };

  /** The upstream ended or failed before the response was complete. */
  private upstreamBroke(): void {
    const failure: TransportFailureRecord = { kind: 'reset', scored: true };
    if (this.responsePhase === 'head') {
      this.respondWithError({ status: 502, error: 'http_response_incomplete', message: 'the destination closed the connection without a complete response' }, failure);
    } else {
      this.finish({ failure, reusable: false, clientDestroyed: true, proxyError: null });
    }
  }

  private readonly onIdle = (): void => {
    if (this.finished) return;
    if (this.responsePhase === 'head' && this.requestBodyDone) {
      this.respondWithError({ status: 504, error: 'http_response_timeout', message: 'no response from the destination in time' }, { kind: 'timeout', scored: true });
    } else {
      this.finish({ failure: null, reusable: false, clientDestroyed: true, proxyError: null });
    }
  };

  /** Only valid before any part of the final response reached the client. */
  private respondWithError(response: ProxyErrorResponse, failure: TransportFailureRecord | null): void {
    const keepAlive = this.requestBodyDone && this.head.keepAlive;
    this.client.write(serializeErrorResponse(response, keepAlive));
    this.finish({ failure, reusable: keepAlive, clientDestroyed: false, proxyError: response });
  }

  private finish(result: Pick<ExchangeOutcome, 'failure' | 'reusable' | 'clientDestroyed' | 'proxyError'>): void {
    if (this.finished) return;
    this.finished = true;
    const { upstream, client } = this;
    upstream.removeListener('data', this.onUpstreamData);
    upstream.removeListener('end', this.onUpstreamEnd);
    upstream.removeListener('error', this.onUpstreamError);
    upstream.removeListener('close', this.onUpstreamClose);
    upstream.removeListener('drain', this.onUpstreamDrain);
    upstream.on('error', ignoreError);
    upstream.setTimeout(0);
    upstream.removeListener('timeout', this.onIdle);
    upstream.destroy();
    client.setTimeout(0);
    client.removeListener('timeout', this.onIdle);
    client.removeListener('drain', this.onClientDrain);
    this.stopReadingClient();
    if (result.clientDestroyed && !client.destroyed) {
      if (result.failure !== null) client.resetAndDestroy();
      else client.destroy();
    }
    this.onDone({
      bytesUp: upstream.bytesWritten - this.dialed.writeBase,
      bytesDown: upstream.bytesRead - this.dialed.readBase,
      failure: result.failure,
      reusable: result.reusable && !client.destroyed,
      clientDestroyed: client.destroyed,
      leftover: this.leftover,
      proxyError: result.proxyError,
    });
  }
}
