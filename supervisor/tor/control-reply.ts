import { ControlProtocolError } from './errors.js';

/**
 * Incremental parser of tor control-port replies (control-spec §2.3, §2.4).
 *
 *   MidReplyLine  = StatusCode "-" ReplyLine
 *   DataReplyLine = StatusCode "+" ReplyLine CmdData        (dot-terminated, dot-stuffed)
 *   EndReplyLine  = StatusCode SP ReplyLine
 *
 * A reply is every line up to and including its EndReplyLine. Status 650 marks an asynchronous
 * event. Input may be split anywhere (even inside a UTF-8 sequence or a CRLF); the output is the
 * same as for the whole input. A malformed line yields a ControlProtocolError item and discards
 * the reply it was part of; parsing resumes at the next line, so bad input never throws.
 */

export type ReplySeparator = '-' | '+' | ' ';

export interface ReplyLine {
  status: number;
  separator: ReplySeparator;
  text: string;
  /** Present on '+' lines: the data block, dot-unstuffed, lines joined with '\n'. */
  data?: string;
}

export interface ControlReply {
  /** Status of the final line, which carries the overall outcome. */
  status: number;
  lines: ReplyLine[];
}

export type ParsedItem = { kind: 'reply'; reply: ControlReply } | { kind: 'error'; error: ControlProtocolError };

export const ASYNC_EVENT_STATUS = 650;

/** A single line longer than this is refused (protects memory against a runaway peer). */
export const DEFAULT_MAX_LINE_BYTES = 1024 * 1024;
/** A data block larger than this is refused. `ns/all` on the public network is a few MB. */
export const DEFAULT_MAX_DATA_BYTES = 64 * 1024 * 1024;

const LINE_HEAD = /^([0-9]{3})([- +])/;

export function isAsyncEvent(reply: ControlReply): boolean {
  return reply.lines[0]?.status === ASYNC_EVENT_STATUS;
}

export function isSuccess(reply: ControlReply): boolean {
  return reply.status >= 200 && reply.status < 300;
}

/** The text of the final line, e.g. "OK" or the error message. */
export function replyMessage(reply: ControlReply): string {
  return reply.lines[reply.lines.length - 1]?.text ?? '';
}

export class ControlReplyParser {
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  /** Bytes of an over-long line are dropped until its newline. */
  private discardingLine = false;
  private lines: ReplyLine[] = [];
  private data: { head: ReplyLine; lines: string[]; bytes: number } | undefined;
  /** After a failure inside a data block, its remaining lines are skipped up to the terminating dot. */
  private skippingData = false;

  constructor(
    private readonly maxLineBytes = DEFAULT_MAX_LINE_BYTES,
    private readonly maxDataBytes = DEFAULT_MAX_DATA_BYTES,
  ) {}

  push(chunk: Buffer | string): ParsedItem[] {
    const out: ParsedItem[] = [];
    let buf = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk;
    for (;;) {
      const nl = buf.indexOf(0x0a);
      if (nl < 0) {
        this.keepPartial(buf, out);
        return out;
      }
      const piece = buf.subarray(0, nl);
      buf = buf.subarray(nl + 1);
      if (this.discardingLine) {
        this.discardingLine = false;
        this.pending = [];
        this.pendingBytes = 0;
        continue;
      }
      if (this.pendingBytes + piece.length > this.maxLineBytes) {
        this.pending = [];
        this.pendingBytes = 0;
        this.fail(out, `line longer than ${this.maxLineBytes} bytes`, '');
        continue;
      }
      const whole = this.pending.length === 0 ? piece : Buffer.concat([...this.pending, piece]);
      this.pending = [];
      this.pendingBytes = 0;
      let line = whole.toString('utf8');
      if (line.endsWith('\r')) line = line.slice(0, -1);
      this.acceptLine(line, out);
    }
  }

  /** True when no partial line or reply is buffered. */
  get idle(): boolean {
    return (
      this.pendingBytes === 0 &&
      this.lines.length === 0 &&
      this.data === undefined &&
      !this.discardingLine &&
      !this.skippingData
    );
  }

  private keepPartial(buf: Buffer, out: ParsedItem[]): void {
    if (buf.length === 0 || this.discardingLine) return;
    if (this.pendingBytes + buf.length > this.maxLineBytes) {
      this.pending = [];
      this.pendingBytes = 0;
      this.discardingLine = true;
      this.fail(out, `line longer than ${this.maxLineBytes} bytes`, '');
      return;
    }
    this.pending.push(Buffer.from(buf));
    this.pendingBytes += buf.length;
  }

  private fail(out: ParsedItem[], message: string, line: string): void {
    if (this.data) this.skippingData = true;
    this.lines = [];
    this.data = undefined;
    out.push({ kind: 'error', error: new ControlProtocolError(message, line) });
  }

  private acceptLine(line: string, out: ParsedItem[]): void {
    if (this.skippingData) {
      if (line === '.') this.skippingData = false;
      return;
    }
    if (this.data) {
      this.acceptDataLine(line, out);
      return;
    }
    const head = LINE_HEAD.exec(line);
    let parsed: ReplyLine;
    if (head) {
      parsed = { status: Number(head[1]), separator: head[2] as ReplySeparator, text: line.slice(4) };
    } else if (/^[0-9]{3}$/.test(line)) {
      // Tolerated: an end line whose text is empty and whose space was trimmed.
      parsed = { status: Number(line), separator: ' ', text: '' };
    } else {
      this.fail(out, 'reply line does not start with a 3-digit status and a separator', line);
      return;
    }
    if (parsed.separator === '+') {
      this.data = { head: parsed, lines: [], bytes: 0 };
      return;
    }
    this.lines.push(parsed);
    if (parsed.separator === ' ') this.finishReply(out);
  }

  private acceptDataLine(line: string, out: ParsedItem[]): void {
    const block = this.data!;
    if (line === '.') {
      block.head.data = block.lines.join('\n');
      this.lines.push(block.head);
      this.data = undefined;
      return;
    }
    const unstuffed = line.startsWith('.') ? line.slice(1) : line;
    block.bytes += unstuffed.length + 1;
    if (block.bytes > this.maxDataBytes) {
      this.fail(out, `data block larger than ${this.maxDataBytes} bytes`, '');
      return;
    }
    block.lines.push(unstuffed);
  }

  private finishReply(out: ParsedItem[]): void {
    const lines = this.lines;
    this.lines = [];
    out.push({ kind: 'reply', reply: { status: lines[lines.length - 1]!.status, lines } });
  }
}

/**
 * The values of a successful GETINFO reply: `250-key=value` lines and `250+key=` data lines; the
 * final `250 OK` carries no value. A value line without `=` is a protocol error.
 */
export function getInfoValues(reply: ControlReply): Map<string, string> {
  const values = new Map<string, string>();
  reply.lines.forEach((line, index) => {
    const last = index === reply.lines.length - 1;
    if (last && line.separator === ' ' && !line.text.includes('=')) return;
    const eq = line.text.indexOf('=');
    if (eq < 0) throw new ControlProtocolError('GETINFO reply line without key=value', line.text);
    const key = line.text.slice(0, eq);
    values.set(key, line.separator === '+' ? (line.data ?? '') : line.text.slice(eq + 1));
  });
  return values;
}
