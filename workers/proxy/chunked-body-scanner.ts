/**
 * Finds where a chunked message body (RFC 9112 section 7.1) ends, without decoding or copying
 * it: the proxy forwards chunked bodies verbatim and only needs to know the last byte, so the
 * following message on the same connection is not mistaken for body. Chunk data is skipped in
 * bulk; only the framing bytes are looked at one by one.
 */

export type ChunkedFramingErrorCode = 'bad-chunk-size' | 'chunk-size-too-large' | 'bad-line-ending' | 'extension-too-long' | 'trailer-too-large' | 'bad-byte';

export class ChunkedFramingError extends Error {
  constructor(
    readonly code: ChunkedFramingErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'ChunkedFramingError';
  }
}

/** Sizes above 2^52 would lose precision; nothing legitimate comes close. */
const MAX_CHUNK_SIZE = 2 ** 52;
const MAX_EXTENSION_BYTES = 4096;
const MAX_TRAILER_BYTES = 16 * 1024;

const enum State {
  SizeStart,
  Size,
  Extension,
  SizeLf,
  Data,
  DataCr,
  DataLf,
  TrailerLineStart,
  TrailerLine,
  TrailerLf,
  FinalLf,
  Done,
  Failed,
}

const CR = 0x0d;
const LF = 0x0a;

function hexValue(byte: number): number {
  if (byte >= 0x30 && byte <= 0x39) return byte - 0x30;
  if (byte >= 0x61 && byte <= 0x66) return byte - 0x57;
  if (byte >= 0x41 && byte <= 0x46) return byte - 0x37;
  return -1;
}

export class ChunkedBodyScanner {
  private state = State.SizeStart;
  private size = 0;
  private remaining = 0;
  private extensionBytes = 0;
  private trailerBytes = 0;
  private failure: ChunkedFramingError | null = null;

  get done(): boolean {
    return this.state === State.Done;
  }

  get error(): ChunkedFramingError | null {
    return this.failure;
  }

  /**
   * Consumes body bytes from buf[start, end). Returns the index just past the last byte that
   * belongs to the body: `end` while the body goes on, less when it ended inside the range
   * (check `done`), and -1 on a framing error (see `error`).
   */
  scan(buf: Uint8Array, start = 0, end = buf.length): number {
    let i = start;
    while (i < end) {
      switch (this.state) {
        case State.Data: {
          const take = Math.min(this.remaining, end - i);
          this.remaining -= take;
          i += take;
          if (this.remaining === 0) this.state = State.DataCr;
          continue;
        }
        case State.Done:
          return i;
        case State.Failed:
          return -1;
        default:
          break;
      }
      const byte = buf[i]!;
      i++;
      switch (this.state) {
        case State.SizeStart: {
          const digit = hexValue(byte);
          if (digit === -1) return this.fail('bad-chunk-size', 'chunk size is not hexadecimal');
          this.size = digit;
          this.extensionBytes = 0;
          this.state = State.Size;
          break;
        }
        case State.Size: {
          const digit = hexValue(byte);
          if (digit !== -1) {
            this.size = this.size * 16 + digit;
            if (this.size > MAX_CHUNK_SIZE) return this.fail('chunk-size-too-large', 'chunk size too large');
          } else if (byte === CR) {
            this.state = State.SizeLf;
          } else if (byte === 0x3b || byte === 0x20 || byte === 0x09) {
            // chunk-ext, possibly after BWS: skipped up to the line end.
            this.state = State.Extension;
            this.extensionBytes = 1;
          } else {
            return this.fail('bad-chunk-size', 'unexpected byte in chunk size');
          }
          break;
        }
        case State.Extension:
          if (byte === CR) this.state = State.SizeLf;
          else if (byte === LF || (byte < 0x20 && byte !== 0x09) || byte === 0x7f) return this.fail('bad-byte', 'control byte in chunk extension');
          else if (++this.extensionBytes > MAX_EXTENSION_BYTES) return this.fail('extension-too-long', 'chunk extension too long');
          break;
        case State.SizeLf:
          if (byte !== LF) return this.fail('bad-line-ending', 'chunk size line not ended by CRLF');
          if (this.size === 0) {
            this.state = State.TrailerLineStart;
          } else {
            this.remaining = this.size;
            this.state = State.Data;
          }
          break;
        case State.DataCr:
          if (byte !== CR) return this.fail('bad-line-ending', 'chunk data not followed by CRLF');
          this.state = State.DataLf;
          break;
        case State.DataLf:
          if (byte !== LF) return this.fail('bad-line-ending', 'chunk data not followed by CRLF');
          this.state = State.SizeStart;
          break;
        case State.TrailerLineStart:
          if (byte === CR) {
            this.state = State.FinalLf;
            break;
          }
          this.state = State.TrailerLine;
          if (!this.countTrailerByte(byte)) return -1;
          break;
        case State.TrailerLine:
          if (byte === CR) this.state = State.TrailerLf;
          else if (!this.countTrailerByte(byte)) return -1;
          break;
        case State.TrailerLf:
          if (byte !== LF) return this.fail('bad-line-ending', 'trailer line not ended by CRLF');
          this.state = State.TrailerLineStart;
          break;
        case State.FinalLf:
          if (byte !== LF) return this.fail('bad-line-ending', 'chunked body not ended by CRLF');
          this.state = State.Done;
          return i;
        default:
          break;
      }
    }
    return this.state === State.Failed ? -1 : i;
  }

  private countTrailerByte(byte: number): boolean {
    if (byte === LF || (byte < 0x20 && byte !== 0x09) || byte === 0x7f) {
      this.fail('bad-byte', 'control byte in trailer section');
      return false;
    }
    if (++this.trailerBytes > MAX_TRAILER_BYTES) {
      this.fail('trailer-too-large', 'trailer section too large');
      return false;
    }
    return true;
  }

  private fail(code: ChunkedFramingErrorCode, message: string): -1 {
    this.state = State.Failed;
    this.failure = new ChunkedFramingError(code, message);
    return -1;
  }
}
