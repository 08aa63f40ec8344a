import fs from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../../../shared/version.js';
import { parse as parseYaml } from 'yaml';
import { schemaViolations, type Schema, type SchemaRoot } from './openapi-schema.js';

/** docs/openapi.yaml as the tests read it, and the checks that tie it to what the API answers. */

export const OPENAPI_FILE = path.join(packageRoot(), 'docs', 'openapi.yaml');
export const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;

export interface MediaType {
  schema?: Schema;
}
export interface ResponseObject {
  description: string;
  headers?: Record<string, unknown>;
  content?: Record<string, MediaType>;
}
export type SecurityRequirement = Record<string, string[]>;
export interface Operation {
  operationId?: string;
  summary?: string;
  security?: SecurityRequirement[];
  parameters?: { name: string; in: string; required?: boolean; schema?: Schema }[];
  requestBody?: { required?: boolean; content: Record<string, MediaType> };
  responses: Record<string, ResponseObject>;
}
export interface OpenApiDocument extends SchemaRoot {
  openapi: string;
  info: { title: string; version: string };
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, Schema>; securitySchemes: Record<string, Record<string, unknown>>; responses?: Record<string, ResponseObject> };
  security?: SecurityRequirement[];
}

export interface DocumentedOperation {
  method: string;
  /** OpenAPI template, e.g. /api/instances/{id}. */
  path: string;
  operation: Operation;
}

let cached: OpenApiDocument | undefined;

export function loadOpenApiDocument(): OpenApiDocument {
  // Duplicate keys and any YAML warning are errors: the file must read one way only.
  cached ??= parseYaml(fs.readFileSync(OPENAPI_FILE, 'utf8'), { strict: true, uniqueKeys: true, prettyErrors: true }) as OpenApiDocument;
  return cached;
}

export function documentedOperations(doc: OpenApiDocument): DocumentedOperation[] {
  const out: DocumentedOperation[] = [];
  for (const [p, item] of Object.entries(doc.paths)) {
    for (const [m, op] of Object.entries(item)) {
      if ((HTTP_METHODS as readonly string[]).includes(m)) out.push({ method: m.toUpperCase(), path: p, operation: op });
    }
  }
  return out;
}

/** `/api/instances/:id` (express) → `/api/instances/{id}` (OpenAPI). */
export function openApiPath(expressPath: string): string {
  return expressPath.replace(/:(\w+)/g, '{$1}');
}

/** The documented operation a concrete request path hits, or null. */
export function operationFor(doc: OpenApiDocument, method: string, requestPath: string): DocumentedOperation | null {
  const pathname = requestPath.split('?')[0] as string;
  for (const op of documentedOperations(doc)) {
    if (op.method !== method.toUpperCase()) continue;
    const pattern = new RegExp(`^${op.path.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\\?\{\w+\\?\}/g, '[^/]+')}$`);
    if (pattern.test(pathname)) return op;
  }
  return null;
}

/** Resolves `$ref: '#/components/responses/X'`. */
export function resolveResponse(doc: OpenApiDocument, r: ResponseObject & { $ref?: string }): ResponseObject {
  if (typeof r.$ref !== 'string') return r;
  const name = /^#\/components\/responses\/(\w+)$/.exec(r.$ref)?.[1];
  const target = name ? doc.components.responses?.[name] : undefined;
  if (!target) throw new Error(`unresolvable response $ref ${r.$ref}`);
  return target;
}

export interface ObservedResponse {
  method: string;
  path: string;
  status: number;
  contentType: string | null;
  body: string;
}

/**
 * What is wrong between a response the API really gave and the document: an undocumented
 * status, a media type the status does not list, or a JSON body that breaks its schema.
 * Requests to paths the document does not describe (unmatched /api/ paths, the dashboard)
 * and HEAD requests are not the document's business and give no complaint.
 */
export function documentationGaps(doc: OpenApiDocument, observed: ObservedResponse): string[] {
  if (observed.method === 'HEAD') return [];
  const op = operationFor(doc, observed.method, observed.path);
  if (!op) return [];
  const what = `${observed.method} ${op.path} → ${observed.status}`;
  const raw = op.operation.responses[String(observed.status)] as (ResponseObject & { $ref?: string }) | undefined;
  if (!raw) return [`${what}: status not documented`];
  const response = resolveResponse(doc, raw);
  if (observed.body === '' || observed.contentType === null) return [];
  const media = observed.contentType.split(';')[0]!.trim();
  const documented = response.content?.[media];
  if (!documented) return [`${what}: media type ${media} not documented (has ${Object.keys(response.content ?? {}).join(', ') || 'none'})`];
  if (media !== 'application/json' || !documented.schema) return [];
  return schemaViolations(doc, documented.schema, JSON.parse(observed.body)).map((v) => `${what}: ${v}`);
}
