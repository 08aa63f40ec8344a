import { ControlArgumentError } from './errors.js';

/**
 * Space-separated arguments of control replies and events: positional tokens, quoted strings and
 * KEY=VALUE pairs whose value may be a quoted string (control-spec §2.1.1 escapes: \n \r \t \\
 * \" \' \xHH and octal \NNN). A token is a keyword pair only when the part before `=` is a
 * keyword (letters, digits, `_`), so circuit paths such as `$FP=nick,$FP2~nick2` stay positional.
 */

export interface ParsedArguments {
  positional: string[];
  keywords: Map<string, string>;
}

const KEYWORD = /^[A-Za-z0-9_]+$/;

/** Parses a quoted string starting at text[start] === '"'. Returns the value and the index after the closing quote. */
export function parseQuotedString(text: string, start: number): { value: string; end: number } {
  if (text[start] !== '"') throw new ControlArgumentError('quoted string expected', text);
  const bytes: number[] = [];
  let i = start + 1;
  const pushLiteral = (ch: string): void => {
    for (const b of Buffer.from(ch, 'utf8')) bytes.push(b);
  };
  while (i < text.length) {
    const ch = text[i]!;
    if (ch === '"') return { value: Buffer.from(bytes).toString('utf8'), end: i + 1 };
    if (ch !== '\\') {
      const cp = text.codePointAt(i)!;
      const literal = String.fromCodePoint(cp);
      pushLiteral(literal);
      i += literal.length;
      continue;
    }
    const next = text[i + 1];
    if (next === undefined) break;
    switch (next) {
      case 'n':
        bytes.push(0x0a);
        i += 2;
        break;
      case 'r':
        bytes.push(0x0d);
        i += 2;
        break;
      case 't':
        bytes.push(0x09);
        i += 2;
        break;
      case 'x': {
        const hex = /^[0-9A-Fa-f]{2}/.exec(text.slice(i + 2, i + 4));
        if (!hex) throw new ControlArgumentError('bad \\x escape in quoted string', text);
        bytes.push(parseInt(hex[0], 16));
        i += 4;
        break;
      }
      default: {
        const octal = /^[0-7]{1,3}/.exec(text.slice(i + 1, i + 4));
        if (octal && parseInt(octal[0], 8) <= 0xff) {
          bytes.push(parseInt(octal[0], 8));
          i += 1 + octal[0].length;
        } else {
          // \\, \" and \' — and, leniently, any other escaped character — stand for themselves.
          const cp = text.codePointAt(i + 1)!;
          const literal = String.fromCodePoint(cp);
          pushLiteral(literal);
          i += 1 + literal.length;
        }
      }
    }
  }
  throw new ControlArgumentError('unterminated quoted string', text);
}

function tokenEnd(text: string, from: number): number {
  const space = text.indexOf(' ', from);
  return space < 0 ? text.length : space;
}

export function parseArguments(text: string): ParsedArguments {
  const positional: string[] = [];
  const keywords = new Map<string, string>();
  let i = 0;
  while (i < text.length) {
    if (text[i] === ' ') {
      i++;
      continue;
    }
    if (text[i] === '"') {
      const q = parseQuotedString(text, i);
      if (q.end < text.length && text[q.end] !== ' ') {
        throw new ControlArgumentError('quoted string followed by junk', text);
      }
      positional.push(q.value);
      i = q.end;
      continue;
    }
    const end = tokenEnd(text, i);
    const eq = text.indexOf('=', i);
    if (eq > i && eq < end && KEYWORD.test(text.slice(i, eq))) {
      const key = text.slice(i, eq);
      if (text[eq + 1] === '"') {
        const q = parseQuotedString(text, eq + 1);
        if (q.end < text.length && text[q.end] !== ' ') {
          throw new ControlArgumentError(`quoted value of ${key} followed by junk`, text);
        }
        keywords.set(key, q.value);
        i = q.end;
      } else {
        keywords.set(key, text.slice(eq + 1, end));
        i = end;
      }
      continue;
    }
    positional.push(text.slice(i, end));
    i = end;
  }
  return { positional, keywords };
}

/** Quotes a value for a command argument (SETCONF values, …). */
export function quoteString(value: string): string {
  let out = '"';
  for (const ch of value) {
    if (ch === '\\' || ch === '"') out += `\\${ch}`;
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\t') out += '\\t';
    else if (ch.charCodeAt(0) < 0x20 || ch === '\u007f') out += `\\${ch.charCodeAt(0).toString(8).padStart(3, '0')}`;
    else out += ch;
  }
  return out + '"';
}
