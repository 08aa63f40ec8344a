/**
 * A deliberately strict reader of the Prometheus text exposition format (0.0.4), so an end-to-end
 * test can tell whether /metrics would be accepted by a scraper, not merely whether it contains
 * some words. Anything the format does not allow is a PrometheusTextError naming the line.
 */

export type MetricType = 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';
const METRIC_TYPES: readonly MetricType[] = ['counter', 'gauge', 'histogram', 'summary', 'untyped'];

export interface Sample {
  /** The sample's own name (e.g. `x_bucket` of histogram family `x`). */
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface MetricFamily {
  name: string;
  type: MetricType;
  help: string;
  samples: Sample[];
}

/** While parsing: whether a TYPE line was seen (samples need one; a second is an error). */
interface FamilyDraft extends MetricFamily {
  typed: boolean;
}

export class PrometheusTextError extends Error {
  constructor(
    readonly lineNumber: number,
    readonly line: string,
    readonly problem: string,
  ) {
    super(`line ${lineNumber}: ${problem}: ${JSON.stringify(line)}`);
    this.name = 'PrometheusTextError';
  }
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const FLOAT = /^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$/;

function parseValue(text: string): number | null {
  // Prometheus reads values with Go's ParseFloat, which takes these words in any case
  // (prom-client writes "Nan" for a gauge with no observations yet).
  const word = text.toLowerCase();
  if (word === 'nan') return NaN;
  if (word === '+inf' || word === 'inf' || word === '+infinity' || word === 'infinity') return Infinity;
  if (word === '-inf' || word === '-infinity') return -Infinity;
  return FLOAT.test(text) ? Number(text) : null;
}

/** HELP text escapes only `\\` and `\n`. */
function unescapeHelp(text: string): string | null {
  let out = '';
  for (let i = 0; i < text.length; i++) {
    const c = text[i] as string;
    if (c !== '\\') {
      out += c;
      continue;
    }
    const next = text[++i];
    if (next === '\\') out += '\\';
    else if (next === 'n') out += '\n';
    else return null;
  }
  return out;
}

/** Reads `{a="x",b="y"}` starting at `text[0] === '{'`; returns the labels and the rest. */
function parseLabels(text: string): { labels: Record<string, string>; rest: string } | string {
  const labels: Record<string, string> = {};
  let i = 1;
  for (;;) {
    if (text[i] === '}') return { labels, rest: text.slice(i + 1) };
    const eq = text.indexOf('=', i);
    if (eq < 0) return 'label without "="';
    const name = text.slice(i, eq);
    if (!LABEL_NAME.test(name)) return `bad label name ${JSON.stringify(name)}`;
    if (name.startsWith('__')) return `reserved label name ${name}`;
    if (Object.hasOwn(labels, name)) return `duplicate label ${name}`;
    if (text[eq + 1] !== '"') return `label ${name} value not quoted`;
    let value = '';
    let j = eq + 2;
    for (;;) {
      const c = text[j];
      if (c === undefined) return `unterminated value of label ${name}`;
      if (c === '"') break;
      if (c === '\n') return `raw newline in label ${name}`;
      if (c === '\\') {
        const e = text[j + 1];
        if (e === '\\') value += '\\';
        else if (e === '"') value += '"';
        else if (e === 'n') value += '\n';
        else return `bad escape \\${e ?? ''} in label ${name}`;
        j += 2;
        continue;
      }
      value += c;
      j++;
    }
    labels[name] = value;
    i = j + 1;
    if (text[i] === ',') {
      i++;
      continue;
    }
    if (text[i] !== '}') return `expected "," or "}" after label ${name}`;
  }
}

/** The family a sample name belongs to, given the families declared so far. */
function familyOf(sampleName: string, families: ReadonlyMap<string, FamilyDraft>): FamilyDraft | undefined {
  const exact = families.get(sampleName);
  if (exact && exact.type !== 'histogram') return exact;
  for (const suffix of ['_bucket', '_sum', '_count']) {
    if (!sampleName.endsWith(suffix)) continue;
    const f = families.get(sampleName.slice(0, -suffix.length));
    if (f && (f.type === 'histogram' || (f.type === 'summary' && suffix !== '_bucket'))) return f;
  }
  return exact;
}

function labelKey(name: string, labels: Record<string, string>, omit?: string): string {
  const parts = Object.keys(labels)
    .filter((k) => k !== omit)
    .sort()
    .map((k) => `${k}=${JSON.stringify(labels[k])}`);
  return `${name}{${parts.join(',')}}`;
}

/** Histogram rules: le on every bucket, +Inf present, cumulative counts, _count = +Inf bucket. */
function checkHistogram(f: MetricFamily): string | null {
  const series = new Map<string, { buckets: Array<[number, number]>; count?: number }>();
  for (const s of f.samples) {
    if (s.name === `${f.name}_bucket`) {
      const le = s.labels.le;
      if (le === undefined) return `bucket of ${f.name} without le`;
      const bound = parseValue(le);
      if (bound === null || Number.isNaN(bound)) return `bad le ${JSON.stringify(le)} in ${f.name}`;
      const key = labelKey(f.name, s.labels, 'le');
      const entry = series.get(key) ?? { buckets: [] };
      entry.buckets.push([bound, s.value]);
      series.set(key, entry);
    } else if (s.name === `${f.name}_count`) {
      const key = labelKey(f.name, s.labels);
      const entry = series.get(key) ?? { buckets: [] };
      entry.count = s.value;
      series.set(key, entry);
    } else if (s.name !== `${f.name}_sum`) {
      return `sample ${s.name} does not belong to histogram ${f.name}`;
    }
  }
  for (const [key, { buckets, count }] of series) {
    const sorted = [...buckets].sort((a, b) => a[0] - b[0]);
    const last = sorted[sorted.length - 1];
    if (!last || last[0] !== Infinity) return `${key} has no +Inf bucket`;
    for (let i = 1; i < sorted.length; i++) {
      if ((sorted[i] as [number, number])[1] < (sorted[i - 1] as [number, number])[1]) return `${key} buckets are not cumulative`;
    }
    if (count === undefined || count !== last[1]) return `${key} _count differs from the +Inf bucket`;
  }
  return null;
}

/**
 * Parses an exposition. Rules enforced: HELP and TYPE at most once per family and before its
 * samples; every sample belongs to a declared family; a family's samples are contiguous; no
 * duplicate series; label escaping; counter families named `_total`; histogram consistency;
 * the text ends with a newline.
 */
export function parsePrometheusText(text: string): Map<string, MetricFamily> {
  const families = new Map<string, FamilyDraft>();
  const helpSeen = new Set<string>();
  const closed = new Set<string>();
  const seenSeries = new Set<string>();
  let current: FamilyDraft | undefined;
  if (text.length > 0 && !text.endsWith('\n')) throw new PrometheusTextError(0, text.slice(-40), 'exposition must end with a newline');
  const lines = text.split('\n');
  lines.pop(); // after the final newline
  lines.forEach((line, index) => {
    const n = index + 1;
    const fail = (problem: string): never => {
      throw new PrometheusTextError(n, line, problem);
    };
    if (line.trim() === '') return;
    if (line.startsWith('#')) {
      const m = /^# (HELP|TYPE) (\S+)(?: (.*))?$/.exec(line);
      if (!m) return; // a plain comment
      const [, keyword, name, rest = ''] = m as unknown as [string, 'HELP' | 'TYPE', string, string | undefined];
      if (!METRIC_NAME.test(name)) fail('bad metric name');
      if (closed.has(name)) fail(`${name} declared again after its samples ended`);
      let family = families.get(name);
      if (!family) {
        if (current && current.name !== name) closed.add(current.name);
        family = { name, type: 'untyped', help: '', samples: [], typed: false };
        families.set(name, family);
        current = family;
      } else if (family.samples.length > 0) {
        fail(`${keyword} for ${name} after its samples`);
      }
      if (keyword === 'HELP') {
        if (helpSeen.has(name)) fail(`second HELP for ${name}`);
        helpSeen.add(name);
        const help = unescapeHelp(rest);
        if (help === null) fail('bad escape in HELP');
        family.help = help as string;
      } else {
        if (family.typed) fail(`second TYPE for ${name}`);
        if (!(METRIC_TYPES as readonly string[]).includes(rest)) fail(`unknown type ${JSON.stringify(rest)}`);
        family.type = rest as MetricType;
        family.typed = true;
        if (family.type === 'counter' && !name.endsWith('_total')) fail(`counter ${name} is not named _total`);
      }
      return;
    }
    const nameMatch = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line);
    if (!nameMatch) return fail('sample line without a metric name');
    const sampleName = nameMatch[0];
    let rest = line.slice(sampleName.length);
    let labels: Record<string, string> = {};
    if (rest.startsWith('{')) {
      const parsed = parseLabels(rest);
      if (typeof parsed === 'string') return fail(parsed);
      labels = parsed.labels;
      rest = parsed.rest;
    }
    const fields = /^ (\S+)(?: (-?\d+))?$/.exec(rest);
    if (!fields) return fail('expected " value [timestamp]" after the name and labels');
    const value = parseValue(fields[1] as string);
    if (value === null) return fail(`bad value ${JSON.stringify(fields[1])}`);
    const family = familyOf(sampleName, families);
    if (!family || !family.typed) return fail(`sample of undeclared family ${sampleName}`);
    if (current !== family || closed.has(family.name)) return fail(`samples of ${family.name} are not contiguous`);
    const series = labelKey(sampleName, labels);
    if (seenSeries.has(series)) return fail(`duplicate series ${series}`);
    seenSeries.add(series);
    if (family.type === 'counter' && (value < 0 || Number.isNaN(value))) return fail('counter value must be a non-negative number');
    family.samples.push({ name: sampleName, labels, value });
  });
  for (const f of families.values()) {
    if (f.type !== 'histogram') continue;
    const problem = checkHistogram(f);
    if (problem) throw new PrometheusTextError(0, f.name, problem);
  }
  return new Map([...families].map(([name, { typed: _typed, ...f }]) => [name, f]));
}

/** The samples of a family whose labels include every given pair. */
export function samplesOf(families: ReadonlyMap<string, MetricFamily>, name: string, labels: Record<string, string> = {}): Sample[] {
  const f = families.get(name);
  if (!f) return [];
  return f.samples.filter((s) => Object.entries(labels).every(([k, v]) => s.labels[k] === v));
}
