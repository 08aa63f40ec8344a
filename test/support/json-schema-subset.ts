/**
 * Checks a JSON value against the JSON Schema subset docs/openapi.yaml uses. Every keyword
 * outside that subset is refused (UnsupportedSchemaKeywordError), so the document cannot state
 * a constraint that the tests silently ignore.
 */

export type Schema = { [keyword: string]: unknown };

export class UnsupportedSchemaKeywordError extends Error {
  constructor(readonly keyword: string, readonly at: string) {
    super(`unsupported schema keyword ${keyword} at ${at}`);
    this.name = 'UnsupportedSchemaKeywordError';
  }
}

const CHECKED = new Set(['$ref', 'type', 'properties', 'required', 'additionalProperties', 'items', 'enum', 'const', 'oneOf', 'minimum', 'maximum', 'minLength', 'maxLength', 'pattern', 'minItems', 'maxItems']);
/** Annotations: carry meaning for readers, constrain nothing. */
const ANNOTATIONS = new Set(['description', 'title', 'examples', 'example', 'format', 'default', 'deprecated', 'readOnly']);
const TYPES = new Set(['null', 'boolean', 'integer', 'number', 'string', 'array', 'object']);

export interface SchemaRoot {
  components?: { schemas?: Record<string, Schema> };
}

function typeOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  return typeof value;
}

function resolve(root: SchemaRoot, ref: string, at: string): Schema {
  const m = /^#\/components\/schemas\/([A-Za-z0-9_.-]+)$/.exec(ref);
  const target = m ? root.components?.schemas?.[m[1] as string] : undefined;
  if (!target) throw new Error(`unresolvable $ref ${ref} at ${at}`);
  return target;
}

/** Throws for a keyword outside the subset anywhere in `schema` (following no $ref). */
export function assertSupportedSchema(schema: Schema, at = '#'): void {
  for (const [k, v] of Object.entries(schema)) {
    if (!CHECKED.has(k) && !ANNOTATIONS.has(k)) throw new UnsupportedSchemaKeywordError(k, at);
    if (k === 'type') {
      for (const t of Array.isArray(v) ? v : [v]) if (!TYPES.has(t as string)) throw new Error(`unknown type ${String(t)} at ${at}`);
    }
    if (k === 'properties') for (const [p, s] of Object.entries(v as Record<string, Schema>)) assertSupportedSchema(s, `${at}/properties/${p}`);
    if ((k === 'items' || k === 'additionalProperties') && typeof v === 'object' && v !== null) assertSupportedSchema(v as Schema, `${at}/${k}`);
    if (k === 'oneOf') (v as Schema[]).forEach((s, i) => assertSupportedSchema(s, `${at}/oneOf/${i}`));
  }
}

/** The list of violations (empty when the value conforms), each with a JSON-pointer-like path. */
export function schemaViolations(root: SchemaRoot, schema: Schema, value: unknown, at = '$'): string[] {
  assertSupportedSchema(schema, at);
  if (typeof schema.$ref === 'string') return schemaViolations(root, resolve(root, schema.$ref, at), value, at);
  const out: string[] = [];
  const actual = typeOf(value);
  if (schema.type !== undefined) {
    const allowed = Array.isArray(schema.type) ? (schema.type as string[]) : [schema.type as string];
    const ok = allowed.includes(actual) || (actual === 'integer' && allowed.includes('number'));
    if (!ok) return [`${at}: expected ${allowed.join(' or ')}, got ${actual}`];
  }
  if (schema.enum !== undefined && !(schema.enum as unknown[]).some((e) => e === value)) out.push(`${at}: ${JSON.stringify(value)} not in ${JSON.stringify(schema.enum)}`);
  if (schema.const !== undefined && schema.const !== value) out.push(`${at}: expected ${JSON.stringify(schema.const)}`);
  if (typeof value === 'number') {
    if (typeof schema.minimum === 'number' && value < schema.minimum) out.push(`${at}: ${value} < ${schema.minimum}`);
    if (typeof schema.maximum === 'number' && value > schema.maximum) out.push(`${at}: ${value} > ${schema.maximum}`);
  }
  if (typeof value === 'string') {
    if (typeof schema.minLength === 'number' && [...value].length < schema.minLength) out.push(`${at}: shorter than ${schema.minLength}`);
    if (typeof schema.maxLength === 'number' && [...value].length > schema.maxLength) out.push(`${at}: longer than ${schema.maxLength}`);
    if (typeof schema.pattern === 'string' && !new RegExp(schema.pattern, 'u').test(value)) out.push(`${at}: ${JSON.stringify(value)} does not match ${schema.pattern}`);
  }
  if (Array.isArray(value)) {
    if (typeof schema.minItems === 'number' && value.length < schema.minItems) out.push(`${at}: fewer than ${schema.minItems} items`);
    if (typeof schema.maxItems === 'number' && value.length > schema.maxItems) out.push(`${at}: more than ${schema.maxItems} items`);
    if (schema.items !== undefined) value.forEach((v, i) => out.push(...schemaViolations(root, schema.items as Schema, v, `${at}[${i}]`)));
  }
  if (actual === 'object') {
    const obj = value as Record<string, unknown>;
    const props = (schema.properties ?? {}) as Record<string, Schema>;
    for (const r of (schema.required ?? []) as string[]) if (!(r in obj)) out.push(`${at}: missing ${r}`);
    for (const [k, v] of Object.entries(obj)) {
      const p = props[k];
      if (p) out.push(...schemaViolations(root, p, v, `${at}.${k}`));
      else if (schema.additionalProperties === false) out.push(`${at}: unexpected property ${k}`);
      else if (typeof schema.additionalProperties === 'object' && schema.additionalProperties !== null) {
        out.push(...schemaViolations(root, schema.additionalProperties as Schema, v, `${at}.${k}`));
      }
    }
  }
  if (schema.oneOf !== undefined) {
    const matching = (schema.oneOf as Schema[]).filter((s) => schemaViolations(root, s, value, at).length === 0).length;
    if (matching !== 1) out.push(`${at}: matches ${matching} of the oneOf alternatives, expected exactly 1`);
  }
  return out;
}
