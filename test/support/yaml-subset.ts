/**
 * A strict reader for the block-style YAML subset that docs/openapi.yaml is written in, so the
 * tests can read the document without a YAML dependency. It understands block mappings and
 * sequences, single-line flow collections, single- and double-quoted scalars, plain scalars
 * with the YAML 1.2 core schema (null, booleans, integers, floats), `|` and `>` block scalars,
 * and full-line or trailing comments. Anything else (anchors, tags, multi-line plain scalars,
 * multi-line flow collections, duplicate keys, tabs in indentation) is refused with the line
 * number, never guessed: a construct this reader might read differently from a real YAML
 * parser fails loudly instead.
 */

export type YamlValue = null | boolean | number | string | YamlValue[] | { [key: string]: YamlValue };

export class YamlSubsetError extends Error {
  constructor(readonly line: number, message: string) {
    super(`line ${line}: ${message}`);
    this.name = 'YamlSubsetError';
  }
}

interface Line {
  no: number;
  indent: number;
  text: string;
}

const INDICATOR_START = /^[&*!%@`|>]/;

export function parseYamlSubset(source: string): YamlValue {
  const raw = source.replace(/\r\n/g, '\n').split('\n');
  const lines: Line[] = [];
  raw.forEach((text, i) => {
    const body = text.replace(/^ */, '');
    if (/^\t/.test(body) && body.trim() !== '') throw new YamlSubsetError(i + 1, 'tab in indentation');
    lines.push({ no: i + 1, indent: text.length - body.length, text: body.replace(/\s+$/, '') });
  });
  const reader = new Reader(lines);
  reader.skipBlank();
  if (reader.done()) return null;
  const first = reader.peek();
  if (first.indent !== 0) throw new YamlSubsetError(first.no, 'the document must start at column 0');
  const value = reader.block(0);
  reader.skipBlank();
  if (!reader.done()) throw new YamlSubsetError(reader.peek().no, 'unexpected content after the document');
  return value;
}

class Reader {
  private i = 0;
  constructor(private readonly lines: Line[]) {}

  done(): boolean {
    return this.i >= this.lines.length;
  }

  peek(): Line {
    return this.lines[this.i] as Line;
  }

  skipBlank(): void {
    while (!this.done() && (this.peek().text === '' || this.peek().text.startsWith('#'))) this.i++;
  }

  block(indent: number): YamlValue {
    const line = this.peek();
    return isSequenceItem(line.text) ? this.sequence(indent) : this.mapping(indent);
  }

  private mapping(indent: number): { [key: string]: YamlValue } {
    const out: { [key: string]: YamlValue } = {};
    for (;;) {
      this.skipBlank();
      if (this.done()) return out;
      const line = this.peek();
      if (line.indent < indent) return out;
      if (line.indent > indent) throw new YamlSubsetError(line.no, 'unexpected indentation');
      if (isSequenceItem(line.text)) return out;
      const { key, rest } = splitKey(line);
      if (Object.prototype.hasOwnProperty.call(out, key)) throw new YamlSubsetError(line.no, `duplicate key ${key}`);
      this.i++;
      out[key] = this.valueAfterKey(line, indent, rest);
    }
  }

  private valueAfterKey(line: Line, indent: number, rest: string): YamlValue {
    if (rest === '') {
      this.skipBlank();
      if (this.done()) return null;
      const next = this.peek();
      if (next.indent > indent) return this.block(next.indent);
      // A sequence may sit at its key's own indentation.
      if (next.indent === indent && isSequenceItem(next.text)) return this.sequence(indent);
      return null;
    }
    if (/^[|>][-+]?$/.test(rest)) return this.blockScalar(line, indent, rest);
    return inlineValue(rest, line.no);
  }

  private sequence(indent: number): YamlValue[] {
    const out: YamlValue[] = [];
    for (;;) {
      this.skipBlank();
      if (this.done()) return out;
      const line = this.peek();
      if (line.indent !== indent || !isSequenceItem(line.text)) {
        if (line.indent > indent) throw new YamlSubsetError(line.no, 'unexpected indentation');
        return out;
      }
      const content = line.text.slice(1).replace(/^ +/, '');
      if (content === '') {
        this.i++;
        this.skipBlank();
        if (this.done() || this.peek().indent <= indent) {
          out.push(null);
          continue;
        }
        out.push(this.block(this.peek().indent));
        continue;
      }
      const column = indent + (line.text.length - content.length);
      if (isSequenceItem(content) || looksLikeMappingEntry(content)) {
        // "- key: value": the item is a block that starts at the content's column.
        this.lines[this.i] = { no: line.no, indent: column, text: content };
        out.push(this.block(column));
        continue;
      }
      this.i++;
      if (/^[|>][-+]?$/.test(content)) {
        out.push(this.blockScalar(line, indent, content));
        continue;
      }
      out.push(inlineValue(content, line.no));
    }
  }

  private blockScalar(header: Line, parentIndent: number, indicator: string): string {
    const body: Line[] = [];
    while (!this.done()) {
      const line = this.peek();
      if (line.text !== '' && line.indent <= parentIndent) break;
      body.push(line);
      this.i++;
    }
    while (body.length > 0 && (body[body.length - 1] as Line).text === '') body.pop();
    const first = body.find((l) => l.text !== '');
    if (!first) return '';
    const contentIndent = first.indent;
    const texts = body.map((l) => {
      if (l.text === '') return '';
      if (l.indent < contentIndent) throw new YamlSubsetError(l.no, 'block scalar line less indented than its first line');
      return ' '.repeat(l.indent - contentIndent) + l.text;
    });
    const chomp = indicator.slice(1);
    if (chomp === '+') throw new YamlSubsetError(header.no, 'keep chomping (+) is not supported');
    let text: string;
    if (indicator[0] === '|') {
      text = texts.join('\n');
    } else {
      if (texts.some((t) => t.startsWith(' '))) throw new YamlSubsetError(header.no, 'more-indented lines in a folded scalar are not supported');
      text = '';
      texts.forEach((t, k) => {
        if (k === 0) text = t;
        else if (t === '') text += '\n';
        else text += texts[k - 1] === '' ? t : ` ${t}`;
      });
    }
    return chomp === '-' ? text : `${text}\n`;
  }
}

function isSequenceItem(text: string): boolean {
  return text === '-' || text.startsWith('- ');
}

function looksLikeMappingEntry(text: string): boolean {
  if (text.startsWith('[') || text.startsWith('{')) return false;
  if (text.startsWith("'") || text.startsWith('"')) {
    const end = quotedEnd(text);
    return end > 0 && /^:( |$)/.test(text.slice(end));
  }
  return /^[^#]*?:( |$)/.test(text);
}

function splitKey(line: Line): { key: string; rest: string } {
  const text = line.text;
  let key: string;
  let after: string;
  if (text.startsWith("'") || text.startsWith('"')) {
    const end = quotedEnd(text);
    if (end < 0) throw new YamlSubsetError(line.no, 'unterminated quoted key');
    key = unquote(text.slice(0, end), line.no);
    after = text.slice(end);
    if (!/^:( |$)/.test(after)) throw new YamlSubsetError(line.no, 'expected ":" after a quoted key');
  } else {
    const m = /^([^#]*?):( |$)/.exec(text);
    if (!m) throw new YamlSubsetError(line.no, `expected "key: value", got ${JSON.stringify(text)}`);
    key = (m[1] as string).trim();
    if (key === '' || INDICATOR_START.test(key) || /^[[{'"?-]/.test(key)) throw new YamlSubsetError(line.no, `unsupported key ${JSON.stringify(key)}`);
    after = text.slice(m[1]!.length);
  }
  return { key, rest: stripComment(after.slice(1).trim(), line.no) };
}

/** Index just past the closing quote of a quoted scalar at the start of `text`, or -1. */
function quotedEnd(text: string): number {
  const q = text[0];
  for (let k = 1; k < text.length; k++) {
    if (q === "'" && text[k] === "'") {
      if (text[k + 1] === "'") {
        k++;
        continue;
      }
      return k + 1;
    }
    if (q === '"') {
      if (text[k] === '\\') {
        k++;
        continue;
      }
      if (text[k] === '"') return k + 1;
    }
  }
  return -1;
}

function unquote(quoted: string, no: number): string {
  if (quoted.startsWith("'")) return quoted.slice(1, -1).replace(/''/g, "'");
  try {
    return JSON.parse(quoted) as string;
  } catch {
    throw new YamlSubsetError(no, `unsupported escape in ${quoted}`);
  }
}

/** A trailing " # comment" is removed; a value that is only a comment is empty. */
function stripComment(text: string, no: number): string {
  if (text.startsWith('#')) return '';
  if (text.startsWith("'") || text.startsWith('"')) {
    const end = quotedEnd(text);
    if (end < 0) throw new YamlSubsetError(no, 'unterminated quoted scalar');
    const tail = text.slice(end);
    if (tail !== '' && !/^\s+#/.test(tail)) throw new YamlSubsetError(no, `unexpected text after a quoted scalar: ${tail}`);
    return text.slice(0, end);
  }
  if (text.startsWith('[') || text.startsWith('{')) return text.replace(/\s+#.*$/, '');
  const hash = text.search(/\s#/);
  return hash < 0 ? text : text.slice(0, hash).trimEnd();
}

function inlineValue(text: string, no: number): YamlValue {
  if (text.startsWith('[') || text.startsWith('{')) {
    const p = new FlowParser(text, no);
    const v = p.value();
    p.end();
    return v;
  }
  if (text.startsWith("'") || text.startsWith('"')) return unquote(stripComment(text, no), no);
  return plainScalar(text, no);
}

function plainScalar(text: string, no: number): YamlValue {
  if (INDICATOR_START.test(text)) throw new YamlSubsetError(no, `plain scalar may not start with ${text[0]}; quote it`);
  if (/: |:$/.test(text)) throw new YamlSubsetError(no, `plain scalar contains ": "; quote it: ${text}`);
  if (/^(null|Null|NULL|~)$/.test(text)) return null;
  if (/^(true|True|TRUE)$/.test(text)) return true;
  if (/^(false|False|FALSE)$/.test(text)) return false;
  if (/^[-+]?[0-9]+$/.test(text)) return Number(text);
  if (/^0o[0-7]+$/.test(text) || /^0x[0-9a-fA-F]+$/.test(text)) return Number(text);
  if (/^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$/.test(text)) return Number(text);
  if (/^[-+]?\.(inf|Inf|INF)$/.test(text) || /^\.(nan|NaN|NAN)$/.test(text)) {
    throw new YamlSubsetError(no, 'infinite and NaN scalars are not supported');
  }
  return text;
}

/** One-line flow collections: [a, 'b', {c: d}] and {a: [b]}. */
class FlowParser {
  private k = 0;
  constructor(private readonly text: string, private readonly no: number) {}

  value(): YamlValue {
    this.space();
    const c = this.text[this.k];
    if (c === '[') return this.sequence();
    if (c === '{') return this.mapping();
    if (c === "'" || c === '"') return this.quoted();
    return plainScalar(this.plain(), this.no);
  }

  end(): void {
    this.space();
    if (this.k !== this.text.length) throw new YamlSubsetError(this.no, `unexpected ${this.text.slice(this.k)} after a flow collection`);
  }

  private sequence(): YamlValue[] {
    const out: YamlValue[] = [];
    this.k++;
    this.space();
    if (this.text[this.k] === ']') {
      this.k++;
      return out;
    }
    for (;;) {
      out.push(this.value());
      this.space();
      const c = this.text[this.k++];
      if (c === ']') return out;
      if (c !== ',') throw new YamlSubsetError(this.no, 'expected "," or "]" in a flow sequence');
    }
  }

  private mapping(): { [key: string]: YamlValue } {
    const out: { [key: string]: YamlValue } = {};
    this.k++;
    this.space();
    if (this.text[this.k] === '}') {
      this.k++;
      return out;
    }
    for (;;) {
      this.space();
      const c = this.text[this.k];
      const key = c === "'" || c === '"' ? this.quoted() : this.plain();
      if (this.text[this.k] !== ':') throw new YamlSubsetError(this.no, 'expected ":" in a flow mapping');
      this.k++;
      if (Object.prototype.hasOwnProperty.call(out, key)) throw new YamlSubsetError(this.no, `duplicate key ${key}`);
      out[key] = this.value();
      this.space();
      const d = this.text[this.k++];
      if (d === '}') return out;
      if (d !== ',') throw new YamlSubsetError(this.no, 'expected "," or "}" in a flow mapping');
    }
  }

  private quoted(): string {
    const end = quotedEnd(this.text.slice(this.k));
    if (end < 0) throw new YamlSubsetError(this.no, 'unterminated quoted scalar');
    const s = unquote(this.text.slice(this.k, this.k + end), this.no);
    this.k += end;
    return s;
  }

  private plain(): string {
    const m = /^[^,[\]{}:#]+/.exec(this.text.slice(this.k));
    if (!m) throw new YamlSubsetError(this.no, `expected a scalar at ${this.text.slice(this.k)}`);
    this.k += m[0].length;
    return m[0].trim();
  }

  private space(): void {
    while (this.text[this.k] === ' ') this.k++;
  }
}
