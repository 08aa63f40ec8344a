/**
 * Parser of an HTTP/1.1 proxy request head (RFC 9112), read with a bounded size before any
 * authentication, and the builder of the head forwarded upstream. Pure: bytes in, a typed result
 * out, never a throw.
 */
import {
  contentLengthOf,
  fieldListLower,
  fieldValues,
  findHeadEnd,
  hopByHopNames,
  isToken,
  parseFieldLines,
  splitHeadLines,
  FieldSyntaxError,
  type HeaderField,
} from './http-fields.js';
import { formatIPv6, parseIPv4, parseIPv6 } from './ip-literal.js';

/** Largest request head (request line, fields and the empty line) accepted before 431. */
export const HTTP_MAX_HEAD_BYTES = 16 * 1024;

/** Longest host name accepted: the SOCKS5 domain field holds at most 255 bytes. */
const MAX_HOST_LENGTH = 255;

export type HttpTarget =
  /** CONNECT host:port */
  | { form: 'authority'; host: string; port: number }
  /** http://host[:port]/path?query, with `path` already in origin-form */
  | { form: 'absolute'; host: string; port: number; path: string };

export type RequestBodyFraming = { kind: 'none' } | { kind: 'length'; length: number } | { kind: 'chunked' };

export interface ProxyCredentials {
  /** The session key; null when the user part is empty. */
  username: string | null;
  /** The token; null when empty. */
  password: string | null;
}

export interface ProxyRequestHead {
  method: string;
  version: '1.0' | '1.1';
  target: HttpTarget;
  fields: HeaderField[];
  /** From Proxy-Authorization: Basic; null when absent or undecodable. */
  credentials: ProxyCredentials | null;
  framing: RequestBodyFraming;
  /** Whether the client asked for the connection to persist after this exchange. */
  keepAlive: boolean;
}

export type HttpHeadErrorCode =
  | 'head-too-large'
  | 'bad-request-line'
  | 'unsupported-version'
  | 'bad-target'
  | 'unsupported-scheme'
  | 'bad-field'
  | 'bad-framing';

export class HttpHeadError extends Error {
  constructor(
    readonly code: HttpHeadErrorCode,
    /** The status to answer with: 400, 431 or 505. */
    readonly status: 400 | 431 | 505,
    message: string,
  ) {
    super(message);
    this.name = 'HttpHeadError';
  }
}

export type HeadParseResult =
  | { status: 'need-more'; scannedTo: number }
  | { status: 'ok'; head: ProxyRequestHead; consumed: number }
  | { status: 'error'; error: HttpHeadError };

export interface HeadParseOptions {
  maxBytes?: number;
  /** Resume the search for the end of the head here (the `scannedTo` of the previous need-more). */
  scanFrom?: number;
}

/**
 * Parses the head at the start of `buf`. Empty lines before the request line are skipped
 * (RFC 9112 section 2.2) and count towards the size limit.
 */
export function parseProxyRequestHead(buf: Buffer, options: HeadParseOptions = {}): HeadParseResult {
  const maxBytes = options.maxBytes ?? HTTP_MAX_HEAD_BYTES;
  let start = 0;
  while (start + 1 < buf.length && buf[start] === 0x0d && buf[start + 1] === 0x0a) start += 2;
  // A head can only end once the request line has begun, so the terminator search starts there.
  const end = findHeadEnd(buf, Math.max(start, (options.scanFrom ?? 0) - 3));
  if (end === -1) {
    if (buf.length > maxBytes) return headError('head-too-large', 431, `request head larger than ${maxBytes} bytes`);
    return { status: 'need-more', scannedTo: buf.length };
  }
  if (end > maxBytes) return headError('head-too-large', 431, `request head larger than ${maxBytes} bytes`);
  const text = buf.toString('latin1', start, end - 4);
  const parsed = parseHeadText(text);
  if (parsed instanceof HttpHeadError) return { status: 'error', error: parsed };
  return { status: 'ok', head: parsed, consumed: end };
}

function headError(code: HttpHeadErrorCode, status: 400 | 431 | 505, message: string): { status: 'error'; error: HttpHeadError } {
  return { status: 'error', error: new HttpHeadError(code, status, message) };
}

function parseHeadText(text: string): ProxyRequestHead | HttpHeadError {
  const lines = splitHeadLines(text);
  if (lines instanceof FieldSyntaxError) return new HttpHeadError('bad-field', 400, lines.message);
  const requestLine = lines[0]!;
  const parts = requestLine.split(' ');
  if (parts.length !== 3) return new HttpHeadError('bad-request-line', 400, 'request line is not "method target version"');
  const [method, rawTarget, versionText] = parts as [string, string, string];
  if (!isToken(method)) return new HttpHeadError('bad-request-line', 400, 'method is not a token');
  const version = parseVersion(versionText);
  if (version instanceof HttpHeadError) return version;

  const fields = parseFieldLines(lines.slice(1));
  if (fields instanceof FieldSyntaxError) return new HttpHeadError('bad-field', 400, fields.message);

  const target = method === 'CONNECT' ? parseAuthorityForm(rawTarget) : parseAbsoluteForm(rawTarget);
  if (target instanceof HttpHeadError) return target;

  const framing = method === 'CONNECT' ? ({ kind: 'none' } as const) : requestFraming(fields, version);
  if (framing instanceof HttpHeadError) return framing;

  return {
    method,
    version,
    target,
    fields,
    credentials: parseProxyAuthorization(fields),
    framing,
    keepAlive: wantsKeepAlive(fields, version),
  };
}

function parseVersion(text: string): '1.0' | '1.1' | HttpHeadError {
  if (text === 'HTTP/1.1') return '1.1';
  if (text === 'HTTP/1.0') return '1.0';
  if (/^HTTP\/\d\.\d$/.test(text)) return new HttpHeadError('unsupported-version', 505, `${text} not supported`);
  return new HttpHeadError('bad-request-line', 400, 'malformed HTTP version');
}

/** CONNECT target: host:port with a mandatory port; IPv6 literals bracketed. */
function parseAuthorityForm(raw: string): HttpTarget | HttpHeadError {
  const authority = parseAuthority(raw, null);
  if (authority instanceof HttpHeadError) return authority;
  return { form: 'authority', host: authority.host, port: authority.port };
}

/** http://authority[path][?query]; fragments and userinfo are refused, https is refused (use CONNECT). */
function parseAbsoluteForm(raw: string): HttpTarget | HttpHeadError {
  const schemeEnd = raw.indexOf('://');
  if (schemeEnd === -1) {
    return new HttpHeadError('bad-target', 400, 'a proxy request needs an absolute URI (http://host/path) or CONNECT');
  }
  const scheme = raw.slice(0, schemeEnd).toLowerCase();
  if (scheme !== 'http') {
    return new HttpHeadError('unsupported-scheme', 400, `scheme ${scheme} is not proxied as a plain request; use CONNECT`);
  }
  if (!isVisibleAscii(raw)) return new HttpHeadError('bad-target', 400, 'request target contains bytes outside visible ASCII');
  if (raw.includes('#')) return new HttpHeadError('bad-target', 400, 'request target contains a fragment');
  const rest = raw.slice(schemeEnd + 3);
  let authorityEnd = rest.length;
  for (let i = 0; i < rest.length; i++) {
    const c = rest[i];
    if (c === '/' || c === '?') {
      authorityEnd = i;
      break;
    }
  }
  const authority = parseAuthority(rest.slice(0, authorityEnd), 80);
  if (authority instanceof HttpHeadError) return authority;
  const pathAndQuery = rest.slice(authorityEnd);
  const path = pathAndQuery === '' ? '/' : pathAndQuery.startsWith('?') ? `/${pathAndQuery}` : pathAndQuery;
  return { form: 'absolute', host: authority.host, port: authority.port, path };
}

function parseAuthority(raw: string, defaultPort: number | null): { host: string; port: number } | HttpHeadError {
  if (raw.includes('@')) return new HttpHeadError('bad-target', 400, 'userinfo in the request target is not allowed');
  let host: string;
  let portText: string | null;
  if (raw.startsWith('[')) {
    const close = raw.indexOf(']');
    if (close === -1) return new HttpHeadError('bad-target', 400, 'unterminated IPv6 literal');
    const literal = raw.slice(1, close);
    const bytes = parseIPv6(literal);
    if (bytes === null) return new HttpHeadError('bad-target', 400, 'invalid IPv6 literal');
    host = formatIPv6(bytes);
    const after = raw.slice(close + 1);
    if (after === '') portText = null;
    else if (after.startsWith(':')) portText = after.slice(1);
    else return new HttpHeadError('bad-target', 400, 'garbage after IPv6 literal');
  } else {
    const colon = raw.lastIndexOf(':');
    host = colon === -1 ? raw : raw.slice(0, colon);
    portText = colon === -1 ? null : raw.slice(colon + 1);
    if (!isHostName(host) && parseIPv4(host) === null) return new HttpHeadError('bad-target', 400, 'invalid host');
  }
  let port: number;
  if (portText === null || portText === '') {
    if (defaultPort === null) return new HttpHeadError('bad-target', 400, 'CONNECT target needs a port');
    port = defaultPort;
  } else {
    if (!/^\d{1,5}$/.test(portText)) return new HttpHeadError('bad-target', 400, 'invalid port');
    port = Number(portText);
    if (port < 1 || port > 65535) return new HttpHeadError('bad-target', 400, 'port out of range');
  }
  return { host, port };
}

/** DNS-style names (letters, digits, hyphen, underscore, dots), as tor expects at the exit. */
function isHostName(host: string): boolean {
  return host.length > 0 && host.length <= MAX_HOST_LENGTH && /^[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*\.?$/.test(host);
}

function isVisibleAscii(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

/** RFC 9112 section 6: refuse anything a second parser could frame differently. */
function requestFraming(fields: readonly HeaderField[], version: '1.0' | '1.1'): RequestBodyFraming | HttpHeadError {
  const codings = fieldListLower(fields, 'transfer-encoding');
  const hasTransferEncoding = fieldValues(fields, 'transfer-encoding').length > 0;
  const contentLength = contentLengthOf(fields);
  if (hasTransferEncoding) {
    if (version === '1.0') return new HttpHeadError('bad-framing', 400, 'Transfer-Encoding in an HTTP/1.0 request');
    if (contentLength.kind !== 'absent') return new HttpHeadError('bad-framing', 400, 'both Transfer-Encoding and Content-Length');
    if (codings.length === 0 || codings[codings.length - 1] !== 'chunked' || codings.indexOf('chunked') !== codings.length - 1) {
      return new HttpHeadError('bad-framing', 400, 'Transfer-Encoding must end in a single chunked');
    }
    return { kind: 'chunked' };
  }
  if (contentLength.kind === 'invalid') return new HttpHeadError('bad-framing', 400, 'invalid Content-Length');
  if (contentLength.kind === 'valid' && contentLength.length > 0) return { kind: 'length', length: contentLength.length };
  return { kind: 'none' };
}

function wantsKeepAlive(fields: readonly HeaderField[], version: '1.0' | '1.1'): boolean {
  const connection = fieldListLower(fields, 'connection');
  if (connection.includes('close')) return false;
  if (version === '1.1') return true;
  return connection.includes('keep-alive') || fieldListLower(fields, 'proxy-connection').includes('keep-alive');
}

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Proxy-Authorization: Basic base64(user:password) (RFC 7617). Anything undecodable, a second
 * Proxy-Authorization, or another scheme is treated as no credential at all.
 */
export function parseProxyAuthorization(fields: readonly HeaderField[]): ProxyCredentials | null {
  const values = fieldValues(fields, 'proxy-authorization');
  if (values.length !== 1) return null;
  const match = /^([A-Za-z]+)[ ]+(\S+)$/.exec(values[0]!);
  if (match === null || match[1]!.toLowerCase() !== 'basic') return null;
  const encoded = match[2]!;
  if (!BASE64.test(encoded) || encoded.length % 4 === 1) return null;
  const bytes = Buffer.from(encoded, 'base64');
  // Node's decoder skips junk silently; a round trip proves the text was canonical base64.
  if (bytes.toString('base64').replace(/=+$/, '') !== encoded.replace(/=+$/, '')) return null;
  let decoded: string;
  try {
    decoded = STRICT_UTF8.decode(bytes);
  } catch {
    return null;
  }
  const colon = decoded.indexOf(':');
  if (colon === -1) return null;
  const username = decoded.slice(0, colon);
  const password = decoded.slice(colon + 1);
  return { username: username === '' ? null : username, password: password === '' ? null : password };
}

/** host[:port] as it appears in a Host field or authority: IPv6 bracketed, default port omitted. */
export function formatAuthority(host: string, port: number, defaultPort: number | null): string {
  const hostPart = host.includes(':') ? `[${host}]` : host;
  return port === defaultPort ? hostPart : `${hostPart}:${port}`;
}

/**
 * The head sent upstream for an absolute-form request: origin-form target, Host from the URI
 * (RFC 9112 section 3.2.2), hop-by-hop fields and the proxy credential removed, framing fields
 * kept because the body follows verbatim, and `Connection: close` because each request gets its
 * own upstream connection.
 */
export function buildUpstreamRequestHead(head: ProxyRequestHead): string {
  if (head.target.form !== 'absolute') throw new RangeError('only absolute-form requests are forwarded as HTTP');
  const strip = hopByHopNames(head.fields);
  let out = `${head.method} ${head.target.path} HTTP/${head.version}\r\nHost: ${formatAuthority(head.target.host, head.target.port, 80)}\r\n`;
  for (const field of head.fields) {
    const lower = field.name.toLowerCase();
    if (lower === 'host' || strip.has(lower)) continue;
    out += `${field.name}: ${field.value}\r\n`;
  }
  return `${out}Connection: close\r\n\r\n`;
}
