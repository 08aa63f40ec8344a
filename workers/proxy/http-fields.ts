/**
 * HTTP/1.1 field lines (RFC 9110 section 5, RFC 9112 section 5), parsed strictly: the proxy
 * forwards what it parses, so anything two parsers could read differently (obs-fold, whitespace
 * before the colon, bare CR or LF, control bytes) is refused rather than guessed at.
 * Text is latin1, so every byte maps to one character and back.
 */

export interface HeaderField {
  /** As sent (case preserved for forwarding). */
  name: string;
  /** Leading and trailing whitespace removed. */
  value: string;
}

const TOKEN_CHARS = (() => {
  const table = new Uint8Array(128);
  for (const c of "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") table[c.charCodeAt(0)] = 1;
  return table;
})();

export function isToken(text: string): boolean {
  if (text.length === 0) return false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 128 || TOKEN_CHARS[c] === 0) return false;
  }
  return true;
}

/** field-value bytes: visible ASCII, SP, HTAB and obs-text; no other control bytes. */
function isValidFieldValue(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if ((c < 0x20 && c !== 0x09) || c === 0x7f) return false;
  }
  return true;
}

export class FieldSyntaxError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'FieldSyntaxError';
  }
}

/**
 * Parses the field lines of a head. `lines` are the lines between the start line and the empty
 * line, already split on CRLF (so a remaining CR or LF inside a line is a bare one).
 */
export function parseFieldLines(lines: readonly string[]): HeaderField[] | FieldSyntaxError {
  const fields: HeaderField[] = [];
  for (const line of lines) {
    const first = line.charCodeAt(0);
    if (first === 0x20 || first === 0x09) return new FieldSyntaxError('obsolete line folding');
    const colon = line.indexOf(':');
    if (colon <= 0) return new FieldSyntaxError('field line without a name');
    const name = line.slice(0, colon);
    if (!isToken(name)) return new FieldSyntaxError('field name is not a token');
    const value = line.slice(colon + 1).replace(/^[ \t]+|[ \t]+$/g, '');
    if (!isValidFieldValue(value)) return new FieldSyntaxError(`invalid byte in field ${name}`);
    fields.push({ name, value });
  }
  return fields;
}

/** All values of a field (case-insensitive name), in order. */
export function fieldValues(fields: readonly HeaderField[], lowerName: string): string[] {
  const out: string[] = [];
  for (const field of fields) if (field.name.toLowerCase() === lowerName) out.push(field.value);
  return out;
}

/** The comma-separated list elements of every instance of a field, lower-cased, empty elements dropped. */
export function fieldListLower(fields: readonly HeaderField[], lowerName: string): string[] {
  const out: string[] = [];
  for (const value of fieldValues(fields, lowerName)) {
    for (const element of value.split(',')) {
      const trimmed = element.trim().toLowerCase();
      if (trimmed !== '') out.push(trimmed);
    }
  }
  return out;
}

/**
 * Hop-by-hop fields (RFC 9110 section 7.6.1) that a proxy removes before forwarding, plus the
 * proxy credential exchange. Transfer-Encoding is not in this list: the proxy passes message
 * bodies through byte for byte, so the framing fields that describe those bytes travel with them.
 * Trailer is kept for the same reason (the trailer section is forwarded verbatim inside the
 * chunked body).
 */
const ALWAYS_HOP_BY_HOP = new Set(['connection', 'proxy-connection', 'keep-alive', 'te', 'upgrade', 'proxy-authorization', 'proxy-authenticate']);

/**
 * Fields a Connection header may never remove: dropping a framing field while forwarding the body
 * it frames would desynchronise the next hop (request smuggling), and Host is rewritten anyway.
 */
const NEVER_CONNECTION_LISTED = new Set(['content-length', 'transfer-encoding', 'host']);

/** The lower-case names to strip from a message before forwarding it. */
export function hopByHopNames(fields: readonly HeaderField[]): Set<string> {
  const names = new Set(ALWAYS_HOP_BY_HOP);
  for (const token of fieldListLower(fields, 'connection')) {
    if (!NEVER_CONNECTION_LISTED.has(token)) names.add(token);
  }
  return names;
}

export type ContentLength = { kind: 'absent' } | { kind: 'valid'; length: number } | { kind: 'invalid' };

/** Content-Length per RFC 9110 section 8.6: repeated identical values are one value; anything else is invalid. */
export function contentLengthOf(fields: readonly HeaderField[]): ContentLength {
  const values = fieldValues(fields, 'content-length');
  if (values.length === 0) return { kind: 'absent' };
  let found: string | null = null;
  for (const value of values) {
    for (const element of value.split(',')) {
      const trimmed = element.trim();
      if (!/^\d{1,15}$/.test(trimmed)) return { kind: 'invalid' };
      const normalised = trimmed.replace(/^0+(?=\d)/, '');
      if (found !== null && found !== normalised) return { kind: 'invalid' };
      found = normalised;
    }
  }
  return found === null ? { kind: 'invalid' } : { kind: 'valid', length: Number(found) };
}

/** Splits a head (without its final empty line) into lines, refusing bare CR or LF. */
export function splitHeadLines(text: string): string[] | FieldSyntaxError {
  const lines = text.split('\r\n');
  for (const line of lines) {
    if (line.includes('\r') || line.includes('\n')) return new FieldSyntaxError('bare CR or LF in head');
  }
  return lines;
}

const HEAD_TERMINATOR = Buffer.from('\r\n\r\n', 'latin1');

/** Index just past the CRLFCRLF that ends a head, searching from `from`; -1 when not there yet. */
export function findHeadEnd(buf: Buffer, from = 0): number {
  const at = buf.indexOf(HEAD_TERMINATOR, Math.max(0, from));
  return at === -1 ? -1 : at + 4;
}
