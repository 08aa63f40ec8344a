/**
 * Parsing of `Authorization` and `Proxy-Authorization` values (RFC 7235 framing, RFC 6750
 * bearer, RFC 7617 basic). Total: any input gives one of the four kinds and never throws.
 */
export type AuthorizationHeader =
  | { kind: 'bearer'; credential: string }
  | { kind: 'basic'; user: string; password: string }
  | { kind: 'none' }
  | { kind: 'malformed' };

/** Longer values are refused unread; a JWT of ours is a few hundred characters. */
export const MAX_AUTHORIZATION_HEADER_LENGTH = 8192;

// auth-scheme = token (RFC 7230 tchar), then 1*SP, then token68.
const SCHEME_AND_CREDENTIALS = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+) +([^ ]+)$/;
const TOKEN68 = /^[A-Za-z0-9\-._~+/]+=*$/;
const STRICT_BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
// RFC 7617: user-id and password are free of control characters (the user-id also of ':').
const CONTROL = /[\p{Cc}]/u;

const utf8 = new TextDecoder('utf-8', { fatal: true });

export function parseAuthorizationHeader(value: unknown): AuthorizationHeader {
  if (value === undefined || value === null) return { kind: 'none' };
  if (typeof value !== 'string') return { kind: 'malformed' };
  if (value.length > MAX_AUTHORIZATION_HEADER_LENGTH) return { kind: 'malformed' };
  const trimmed = trimOptionalWhitespace(value);
  if (trimmed === '') return { kind: 'none' };
  const match = SCHEME_AND_CREDENTIALS.exec(trimmed);
  if (match === null) return { kind: 'malformed' };
  const scheme = match[1]!.toLowerCase();
  const credentials = match[2]!;
  if (!TOKEN68.test(credentials)) return { kind: 'malformed' };
  if (scheme === 'bearer') return { kind: 'bearer', credential: credentials };
  if (scheme === 'basic') return parseBasic(credentials);
  return { kind: 'malformed' };
}

/** Strips leading and trailing SP/HTAB in linear time (a `[ \t]+$` regex is quadratic on long runs). */
function trimOptionalWhitespace(text: string): string {
  let start = 0;
  let end = text.length;
  while (start < end && (text[start] === ' ' || text[start] === '\t')) start++;
  while (end > start && (text[end - 1] === ' ' || text[end - 1] === '\t')) end--;
  return text.slice(start, end);
}

function parseBasic(encoded: string): AuthorizationHeader {
  if (!STRICT_BASE64.test(encoded)) return { kind: 'malformed' };
  let decoded: string;
  try {
    decoded = utf8.decode(Buffer.from(encoded, 'base64'));
  } catch {
    return { kind: 'malformed' };
  }
  const colon = decoded.indexOf(':');
  if (colon < 0 || CONTROL.test(decoded)) return { kind: 'malformed' };
  return { kind: 'basic', user: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}
