import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';

/**
 * Checks JSON values against the schemas of docs/openapi.yaml (OpenAPI 3.1, so JSON Schema
 * 2020-12) with ajv in strict mode: a keyword ajv does not know is refused when the schema is
 * compiled, so the document cannot state a constraint the tests silently ignore.
 */

export type Schema = { [keyword: string]: unknown };

export interface SchemaRoot {
  components?: { schemas?: Record<string, Schema> };
}

// ajv-formats is CommonJS with `exports.default`: imported from ESM, the callable is `.default`.
type AddFormats = (ajv: Ajv2020, formats: string[]) => Ajv2020;
const addFormats = (addFormatsModule as unknown as { default: AddFormats }).default;

/** The document's base URI inside ajv; its `#/components/schemas/X` refs resolve against it. */
const DOCUMENT_ID = 'https://exitpool.invalid/openapi.json';

const validators = new WeakMap<SchemaRoot, { ajv: Ajv2020; compiled: Map<string, ValidateFunction> }>();

function ajvFor(root: SchemaRoot): { ajv: Ajv2020; compiled: Map<string, ValidateFunction> } {
  let entry = validators.get(root);
  if (!entry) {
    const ajv = new Ajv2020({ strict: true, allErrors: true });
    addFormats(ajv, ['date-time']);
    // OpenAPI's own annotation, which JSON Schema does not define: it constrains nothing.
    ajv.addKeyword({ keyword: 'example', schemaType: ['string', 'number', 'boolean', 'object', 'array', 'null'] });
    // The document itself, under a base URI, so its relative $refs resolve; only components are schemas.
    ajv.addKeyword({ keyword: 'components' });
    ajv.addSchema({ $id: DOCUMENT_ID, components: { schemas: root.components?.schemas ?? {} } });
    entry = { ajv, compiled: new Map() };
    validators.set(root, entry);
  }
  return entry;
}

function describe(e: ErrorObject): string {
  const at = `$${e.instancePath.replaceAll('/', '.')}`;
  return `${at}: ${e.message ?? e.keyword}${e.params && Object.keys(e.params).length > 0 ? ` ${JSON.stringify(e.params)}` : ''}`;
}

/**
 * Compiles `schema` (a $ref into the document, or an inline schema using such refs) in strict
 * mode; throws for an unknown keyword, format or unresolvable $ref.
 */
export function compileSchema(root: SchemaRoot, schema: Schema): ValidateFunction {
  const { ajv, compiled } = ajvFor(root);
  const key = JSON.stringify(schema);
  let validate = compiled.get(key);
  if (!validate) {
    const ref = typeof schema.$ref === 'string' && schema.$ref.startsWith('#') ? { $ref: `${DOCUMENT_ID}${schema.$ref}` } : { $id: `${DOCUMENT_ID}/inline/${compiled.size}`, ...rebase(schema) };
    validate = ajv.compile(ref);
    compiled.set(key, validate);
  }
  return validate;
}

/** Inline schemas live under their own $id: point their document refs at the document. */
function rebase(value: unknown): Schema {
  return JSON.parse(JSON.stringify(value).replace(/"\$ref":"#\//g, `"$ref":"${DOCUMENT_ID}#/`)) as Schema;
}

/** The violations of `value` (empty when it conforms), each with the path where it happened. */
export function schemaViolations(root: SchemaRoot, schema: Schema, value: unknown): string[] {
  const validate = compileSchema(root, schema);
  return validate(value) ? [] : (validate.errors ?? []).map(describe);
}
