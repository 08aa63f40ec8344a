/**
 * The origin's response head, as far as the proxy needs it: where the body ends (so the client
 * connection can be kept alive) and which hop-by-hop fields to drop before relaying it.
 */
import {
  FieldSyntaxError,
  contentLengthOf,
  fieldListLower,
  fieldValues,
  findHeadEnd,
  hopByHopNames,
  parseFieldLines,
  splitHeadLines,
  type HeaderField,
} from './http-fields.js';

/** Response heads carry cookies and policies and run larger than request heads. */
export const HTTP_MAX_RESPONSE_HEAD_BYTES = 64 * 1024;

export interface ResponseHead {
  status: number;
  reason: string;
  fields: HeaderField[];
}

export type ResponseHeadErrorCode = 'head-too-large' | 'bad-status-line' | 'bad-field' | 'bad-framing';

export class ResponseHeadError extends Error {
  constructor(
    readonly code: ResponseHeadErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'ResponseHeadError';
  }
}

export type ResponseHeadParseResult =
  | { status: 'need-more'; scannedTo: number }
  | { status: 'ok'; head: ResponseHead; consumed: number }
  | { status: 'error'; error: ResponseHeadError };

export function parseResponseHead(buf: Buffer, scanFrom = 0, maxBytes = HTTP_MAX_RESPONSE_HEAD_BYTES): ResponseHeadParseResult {
  const end = findHeadEnd(buf, scanFrom - 3);
  if (end === -1) {
    if (buf.length > maxBytes) return { status: 'error', error: new ResponseHeadError('head-too-large', 'response head too large') };
    return { status: 'need-more', scannedTo: buf.length };
  }
  if (end > maxBytes) return { status: 'error', error: new ResponseHeadError('head-too-large', 'response head too large') };
  const lines = splitHeadLines(buf.toString('latin1', 0, end - 4));
  if (lines instanceof FieldSyntaxError) return { status: 'error', error: new ResponseHeadError('bad-field', lines.message) };
  const statusLine = /^HTTP\/1\.[01] (\d{3}) ?(.*)$/.exec(lines[0]!);
  if (statusLine === null) return { status: 'error', error: new ResponseHeadError('bad-status-line', 'malformed status line') };
  const fields = parseFieldLines(lines.slice(1));
  if (fields instanceof FieldSyntaxError) return { status: 'error', error: new ResponseHeadError('bad-field', fields.message) };
  return { status: 'ok', head: { status: Number(statusLine[1]), reason: statusLine[2]!, fields }, consumed: end };
}

export type ResponseFraming = { kind: 'none' } | { kind: 'length'; length: number } | { kind: 'chunked' } | { kind: 'until-close' };

/** RFC 9112 section 6.3, for a response to a request with the given method. */
export function responseFraming(head: ResponseHead, requestMethod: string): ResponseFraming | ResponseHeadError {
  if (requestMethod === 'HEAD' || head.status === 204 || head.status === 304 || (head.status >= 100 && head.status < 200)) {
    return { kind: 'none' };
  }
  if (fieldValues(head.fields, 'transfer-encoding').length > 0) {
    const codings = fieldListLower(head.fields, 'transfer-encoding');
    return codings[codings.length - 1] === 'chunked' ? { kind: 'chunked' } : { kind: 'until-close' };
  }
  const length = contentLengthOf(head.fields);
  if (length.kind === 'invalid') return new ResponseHeadError('bad-framing', 'invalid Content-Length in response');
  if (length.kind === 'valid') return length.length === 0 ? { kind: 'none' } : { kind: 'length', length: length.length };
  return { kind: 'until-close' };
}

/**
 * The head relayed to the client. Hop-by-hop fields go; framing fields stay with the body they
 * describe (a Content-Length next to Transfer-Encoding is dropped, as RFC 9112 section 6.3 says
 * the latter wins). The Connection field states what the proxy will do with the client connection.
 */
/** The response header EXIT_HEADER adds: the exit IP that serves the session. */
export const EXIT_HEADER_NAME = 'Exitpool-Exit';

/** `extraFields` are the proxy's own (EXIT_HEADER), added after the destination's. */
export function buildClientResponseHead(head: ResponseHead, clientVersion: '1.0' | '1.1', keepAlive: boolean, extraFields: readonly string[] = []): string {
  const strip = hopByHopNames(head.fields);
  const hasTransferEncoding = fieldValues(head.fields, 'transfer-encoding').length > 0;
  let out = `HTTP/1.1 ${head.status} ${head.reason}\r\n`;
  for (const field of head.fields) {
    const lower = field.name.toLowerCase();
    if (strip.has(lower)) continue;
    if (hasTransferEncoding && lower === 'content-length') continue;
    out += `${field.name}: ${field.value}\r\n`;
  }
  for (const line of extraFields) out += `${line}\r\n`;
  if (!keepAlive) out += 'Connection: close\r\n';
  else if (clientVersion === '1.0') out += 'Connection: keep-alive\r\n';
  return `${out}\r\n`;
}
