import { expect } from 'chai';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ApiAuthenticator } from '../../workers/api/auth/api-authenticator.js';
import { SignInCredentials } from '../../workers/api/auth/sign-in-credentials.js';
import { MAX_POOL_SIZE, loadConfig } from '../../shared/config/index.js';
import { serviceVersion } from '../../shared/version.js';
import { AUDIT_CAPACITY, AUDIT_DEFAULT_LIMIT, AuditLog } from '../../supervisor/audit/audit-log.js';
import { AuthStore } from '../../supervisor/auth/auth-store.js';
import { healthView, initialHealthState, reduceHealth, type HealthEvent, type HealthMachineState } from '../../supervisor/health/health-machine.js';
import type { Pool } from '../../supervisor/pool/pool.js';
import { stateSnapshot } from '../../supervisor/worker-ipc.js';
import type { Access } from '../../workers/api/access.js';
import { authRoutes } from '../../workers/api/auth-routes.js';
import { EVENTS_DEFAULT_LIMIT, EVENTS_MAX_LIMIT, POOL_ROUTES } from '../../workers/api/route-table.js';
import { fakeExit, fakePool } from '../support/fakes/pool-parts.js';
import { parse as parseYaml } from 'yaml';
import { compileSchema, schemaViolations, type Schema } from '../support/parsers/openapi-schema.js';
import {
  OPENAPI_FILE,
  documentedOperations,
  loadOpenApiDocument,
  openApiPath,
  resolveResponse,
  type OpenApiDocument,
  type Operation,
  type SecurityRequirement,
} from '../support/parsers/openapi-document.js';
import { quietLogger } from '../support/fakes/quiet-logger.js';

/**
 * docs/openapi.yaml against the code. The document is hand-written YAML (readable, and what
 * external tools consume) and read here by a strict subset reader; these tests make it unable
 * to drift: the same (method, path) set as the route table, the security requirement each
 * route's access implies, constants named in it equal to the code's, and every schema
 * satisfied by what the real supervisor code produces. The component tests add the other
 * half: every response they provoke from the real app is checked against it.
 */

interface TableRoute {
  method: string;
  path: string;
  access: Access;
}

function routeTable(): TableRoute[] {
  const unused = (): ApiAuthenticator => {
    throw new Error('handlers are not called here');
  };
  return [
    ...[...authRoutes(unused, quietLogger()), ...POOL_ROUTES].map((r) => ({ method: r.method, path: openApiPath(r.path), access: r.access })),
    // Mounted by createApiApp next to the table: the stream, and the public operational paths.
    { method: 'GET', path: '/api/stream', access: 'stream' },
    { method: 'GET', path: '/health', access: 'public' },
    { method: 'GET', path: '/metrics', access: 'public' },
  ];
}

/** The security requirement each access level must be documented with. */
function expectedSecurity(access: Access): SecurityRequirement[] {
  switch (access) {
    case 'public':
      return [];
    case 'proxy':
      return [{ bearerAuth: ['proxy'] }];
    case 'admin':
      return [{ bearerAuth: ['admin'] }];
    case 'stream':
      return [{ bearerAuth: ['admin'] }, { streamTicket: [] }];
  }
}

function schema(doc: OpenApiDocument, name: string): Schema {
  const s = doc.components.schemas[name];
  if (!s) throw new Error(`no schema ${name}`);
  return s;
}

function expectConforms(doc: OpenApiDocument, name: string, value: unknown): void {
  schema(doc, name); // a name the document does not have fails here, with its name
  expect(schemaViolations(doc, { $ref: `#/components/schemas/${name}` }, value), `${name}: ${JSON.stringify(value)}`).to.deep.equal([]);
}

/** Every schema object in the document, with where it sits. */
function allSchemas(doc: OpenApiDocument): [string, Schema][] {
  const out: [string, Schema][] = Object.entries(doc.components.schemas).map(([n, s]) => [`#/components/schemas/${n}`, s]);
  const media = (where: string, content: Record<string, { schema?: Schema }> | undefined): void => {
    for (const [m, c] of Object.entries(content ?? {})) if (c.schema) out.push([`${where} ${m}`, c.schema]);
  };
  for (const [n, r] of Object.entries(doc.components.responses ?? {})) media(`response ${n}`, r.content);
  for (const op of documentedOperations(doc)) {
    const where = `${op.method} ${op.path}`;
    media(`${where} request`, op.operation.requestBody?.content);
    for (const [status, r] of Object.entries(op.operation.responses)) media(`${where} ${status}`, (r as { content?: Record<string, { schema?: Schema }> }).content);
    for (const p of op.operation.parameters ?? []) if (p.schema) out.push([`${where} parameter ${p.name}`, p.schema]);
  }
  return out;
}

function parameters(doc: OpenApiDocument, op: Operation): { name: string; in: string; required?: boolean; schema?: Schema }[] {
  return (op.parameters ?? []).map((p) => {
    const ref = (p as { $ref?: string }).$ref;
    if (ref === undefined) return p;
    const name = /^#\/components\/parameters\/(\w+)$/.exec(ref)?.[1];
    const target = name ? (doc.components as { parameters?: Record<string, typeof p> }).parameters?.[name] : undefined;
    if (!target) throw new Error(`unresolvable parameter ${ref}`);
    return target;
  });
}

describe('docs/openapi.yaml', () => {
  const doc = loadOpenApiDocument();

  it('is an OpenAPI 3.1 document for this version of the service', () => {
    expect(doc.openapi).to.match(/^3\.1\.\d+$/);
    expect(doc.info.version).to.equal(serviceVersion());
  });

  it('documents exactly the routes of the route table, the stream, /health and /metrics', () => {
    const documented = documentedOperations(doc).map((o) => `${o.method} ${o.path}`).sort();
    const table = routeTable().map((r) => `${r.method} ${r.path}`).sort();
    expect(documented).to.deep.equal(table);
    expect(new Set(table).size).to.equal(table.length);
  });

  it("gives every operation the security requirement of its route's access", () => {
    for (const r of routeTable()) {
      const op = doc.paths[r.path]?.[r.method.toLowerCase()];
      expect(op, `${r.method} ${r.path}`).to.not.equal(undefined);
      expect(op?.security, `${r.method} ${r.path} (${r.access})`).to.deep.equal(expectedSecurity(r.access));
    }
    expect(Object.keys(doc.components.securitySchemes).sort()).to.deep.equal(['bearerAuth', 'streamTicket']);
    expect(doc.components.securitySchemes.bearerAuth).to.include({ type: 'http', scheme: 'bearer' });
    expect(doc.components.securitySchemes.streamTicket).to.include({ type: 'apiKey', in: 'query', name: 'ticket' });
  });

  it('documents the guard: 401 wherever a credential is needed, 403 exactly where a valid one can fall short', () => {
    for (const r of routeTable()) {
      const statuses = Object.keys(doc.paths[r.path]![r.method.toLowerCase()]!.responses);
      const what = `${r.method} ${r.path}`;
      if (r.access !== 'public') expect(statuses, what).to.include('401');
      // No credential lacks the proxy scope but a ticket, and a ticket is a 401 off the stream.
      if (r.access === 'admin' || r.access === 'stream') expect(statuses, what).to.include('403');
      else expect(statuses, what).to.not.include('403');
      for (const s of statuses) expect(Number(s), `${what} ${s}`).to.be.within(200, 599);
      const unauthorized = doc.paths[r.path]![r.method.toLowerCase()]!.responses['401'];
      if (unauthorized) expect(Object.keys(resolveResponse(doc, unauthorized).headers ?? {})).to.include('WWW-Authenticate');
      const forbidden = doc.paths[r.path]![r.method.toLowerCase()]!.responses['403'];
      if (forbidden) expect(resolveResponse(doc, forbidden).headers ?? {}).to.not.have.property('WWW-Authenticate');
    }
  });

  it('declares every path parameter of every template, and no other', () => {
    for (const op of documentedOperations(doc)) {
      const inTemplate = [...op.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]).sort();
      const declared = parameters(doc, op.operation).filter((p) => p.in === 'path');
      expect(declared.map((p) => p.name).sort(), `${op.method} ${op.path}`).to.deep.equal(inTemplate);
      for (const p of declared) expect(p.required, `${op.method} ${op.path} ${p.name}`).to.equal(true);
    }
  });

  it('uses only schema keywords and formats the checks enforce (ajv strict mode), and every $ref resolves', () => {
    for (const [where, s] of allSchemas(doc)) {
      expect(() => compileSchema(doc, s), where).to.not.throw();
    }
    const refs = JSON.stringify(doc).match(/"\$ref":"[^"]+"/g) ?? [];
    expect(refs.length).to.be.greaterThan(50);
    for (const r of refs) {
      const [, section, name] = /"\$ref":"#\/components\/(\w+)\/(\w+)"/.exec(r) ?? [];
      expect((doc.components as unknown as Record<string, Record<string, unknown>>)[section as string]?.[name as string], r).to.not.equal(undefined);
    }
  });

  it("names the code's constants: resize bounds and the events limit", () => {
    const resize = schema(doc, 'ResizeRequest').properties as Record<string, Schema>;
    expect(resize.size).to.include({ minimum: 1, maximum: MAX_POOL_SIZE });
    const limit = parameters(doc, doc.paths['/api/events']!.get!).find((p) => p.name === 'limit')?.schema;
    expect(EVENTS_DEFAULT_LIMIT).to.equal(AUDIT_DEFAULT_LIMIT);
    expect(EVENTS_MAX_LIMIT).to.equal(AUDIT_CAPACITY);
    expect(limit).to.include({ minimum: 1, maximum: AUDIT_CAPACITY, default: AUDIT_DEFAULT_LIMIT });
  });

  describe('schemas against what the supervisor really produces', () => {
    let dataDir: string;
    before(() => {
      dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-openapi-'));
    });
    after(() => fs.rmSync(dataDir, { recursive: true, force: true }));

    function poolRig(env: Record<string, string>): { pool: Pool; audit: AuditLog } {
      const { pool, audit, instances } = fakePool({ POOL_SIZE: '3', ...env }, { readyAll: false });
      for (const i of instances.values()) {
        i.exitInfo = fakeExit(`127.0.0.${40 + i.id}`, { exitCountry: 'zz', exitNickname: `exit${i.id}` });
        i.setReady(true);
      }
      return { pool, audit };
    }

    it('pool summary, instances, sessions, actions, events, statistics and the stream snapshot', async () => {
      const envs: Record<string, string>[] = [{}, { SESSION_PORT_BASE: '20000', AUTH_DISABLED: 'true' }];
      for (const env of envs) {
        const { pool, audit } = poolRig(env);
        const r = pool.route({ key: 'alice', named: true, listener: 'socks' }, 0);
        if (!r.ok) throw new Error('not routed');
        pool.recordCloses([{ key: 'alice', session: pool.sessions.get('alice')?.id ?? null, instance: r.instance, bytesUp: 10, bytesDown: 20, ok: true, latencyMs: 12, endedAt: 0, host: 'example.test', credential: 'token:t' }], 0);
        pool.tick();
        expectConforms(doc, 'PoolSummary', pool.views.summary());
        for (const v of pool.views.instanceViews()) expectConforms(doc, 'Instance', v);
        for (const v of pool.views.sessionViews()) expectConforms(doc, 'Session', v);
        const one = pool.views.sessionView('alice');
        expectConforms(doc, 'Session', one);
        expect('session_port' in one).to.equal('SESSION_PORT_BASE' in env);
        expectConforms(doc, 'FailureResult', await pool.reportFailure('alice', 'captcha', 'a challenge page', { kind: 'token', id: 'test' }));
        expectConforms(doc, 'SessionRotateResult', await pool.rotateSession('alice', true));
        expectConforms(doc, 'Instance', await pool.instanceAction(0, 'drain'));
        expectConforms(doc, 'PoolRotateResult', pool.rotatePool());
        expectConforms(doc, 'PoolRotateResult', pool.rotatePool());
        expectConforms(doc, 'ResizeResult', pool.resize(5));
        expectConforms(doc, 'ResizeResult', pool.resize(2));
        pool.tick();
        for (const s of pool.stats.series('fine')) expectConforms(doc, 'StatsSample', s);
        expectConforms(doc, 'StateSnapshot', stateSnapshot(pool));
        expect(audit.size).to.be.greaterThan(4);
        for (const e of audit.recent()) expectConforms(doc, 'AuditEvent', e);
        await pool.stop();
      }
    });

    it('the health object of the real state machine, through quarantine and remediation', () => {
      const config = loadConfig({});
      const health = { ...config };
      let s: HealthMachineState = initialHealthState(health);
      const events: HealthEvent[] = [
        { type: 'bootstrapped' },
        { type: 'failure', kind: 'captcha', source: 'client', scored: true },
        { type: 'failure', kind: 'transport', source: 'transport', scored: true },
        { type: 'failure', kind: 'captcha', source: 'client', scored: true },
        { type: 'failure', kind: 'captcha', source: 'client', scored: true },
        { type: 'remediationBegan' },
      ];
      expectConforms(doc, 'Health', healthView(s));
      const states = new Set<string>();
      for (const e of events) {
        s = reduceHealth(s, e, 1000, health).state;
        expectConforms(doc, 'Health', healthView(s));
        states.add(healthView(s).state);
      }
      expect(states).to.include('healthy');
      expect([...states].some((x) => x === 'quarantined' || x === 'remediating')).to.equal(true);
    });

    it('tokens, sign-in results and tickets', async () => {
      const { store, generated } = await AuthStore.open({
        config: { adminUser: 'admin', adminPassword: 'pw', proxyToken: 'tp_TESTPROXYTOKEN0000000a', authDisabled: false, dataDir },
        log: quietLogger(),
        bcryptCost: 4,
      });
      const created = await store.createToken({ name: 'ci', scope: 'admin' });
      expectConforms(doc, 'CreatedToken', created.token);
      expectConforms(doc, 'CreatedToken', generated.proxyToken);
      const listed = store.listTokens();
      expect(listed.map((t) => t.source)).to.include.members(['config', 'store']);
      for (const t of listed) expectConforms(doc, 'Token', t);
      const credentials = new SignInCredentials(store.snapshots().api.signingKey, 'admin', 60_000);
      expectConforms(doc, 'LoginResult', credentials.issueSession());
      expectConforms(doc, 'Ticket', credentials.issueTicket({ kind: 'session', user: 'admin' }));
      await store.idle();
    });
  });
});

describe('docs/api.md', () => {
  const text = fs.readFileSync(path.join(path.dirname(OPENAPI_FILE), 'api.md'), 'utf8');

  it('has a section per route with its access and a curl example, and lists every route in the endpoint table', () => {
    const sections = new Map<string, string>();
    const parts = text.split(/^### /m).slice(1);
    for (const part of parts) sections.set(part.slice(0, part.indexOf('\n')).trim(), part);
    for (const r of routeTable()) {
      const title = `${r.method} ${r.path}`;
      const section = sections.get(title);
      expect(section, `section ### ${title}`).to.be.a('string');
      expect(section, title).to.match(new RegExp(`Access: ${r.access === 'stream' ? 'stream' : r.access === 'public' ? 'public' : r.access === 'proxy' ? 'proxy' : '(admin|a session credential)'}`));
      expect(section, title).to.match(/```sh\n(.*\n)*?.*curl .*127\.0\.0\.1:8080/);
      expect(text, `endpoint table row for ${title}`).to.contain(`| [${title}](#`);
    }
  });

  it('uses only $JWT and $TOKEN as bearer credentials in its examples', () => {
    const bearers = [...text.matchAll(/-H "Authorization: Bearer ([^"]+)"/g)].map((m) => m[1]);
    expect(bearers.length).to.be.greaterThan(20);
    for (const b of bearers) expect(['$JWT', '$TOKEN']).to.include(b);
  });
});

describe('the strict readers behind the OpenAPI checks (yaml, ajv)', () => {
  it('refuse a document that reads two ways: a duplicate key', () => {
    expect(() => parseYaml('a: 1\na: 2\n', { strict: true, uniqueKeys: true })).to.throw(/unique|duplicate/i);
  });

  it('refuse a schema keyword, a format or a $ref that the checks would not enforce', () => {
    const root = { components: { schemas: { Known: { type: 'string' } } } };
    for (const hostile of [{ type: 'string', maxLenght: 3 }, { type: 'string', format: 'no-such-format' }, { $ref: '#/components/schemas/Unknown' }]) {
      expect(() => compileSchema(root, hostile), JSON.stringify(hostile)).to.throw();
    }
    expect(schemaViolations(root, { $ref: '#/components/schemas/Known' }, 'x')).to.deep.equal([]);
    expect(schemaViolations(root, { $ref: '#/components/schemas/Known' }, 3)).to.have.length(1);
    expect(schemaViolations(root, { type: 'array', items: { $ref: '#/components/schemas/Known' } }, ['a', 1])[0]).to.match(/^\$\.1: /);
  });
});
