/**
 * The Kubernetes manifests (deploy/kubernetes) and the fleet's compose file (deploy/compose),
 * checked without a cluster or a Docker engine: every Kubernetes object against its API schema
 * (kubernetes-models, generated from the Kubernetes OpenAPI definitions), and both against the
 * service's own variable table, so a misspelt or malformed setting fails here, not in a pod.
 */
import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments, parse as parseYaml } from 'yaml';
import { VARIABLES } from '../../shared/config/index.js';
import { WORKER_EXIT_MARGIN_MS } from '../../supervisor/cluster/worker-manager.js';
import { DEFAULT_STOP_GRACE_MS } from '../../supervisor/tor/tor-process.js';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const kubeDir = path.join(repo, 'deploy', 'kubernetes');
const composeDir = path.join(repo, 'deploy', 'compose');

interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string };
  [field: string]: unknown;
}

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { secretKeyRef?: { name: string; key: string }; fieldRef?: { fieldPath: string } };
}

function objectsIn(file: string): KubeObject[] {
  return parseAllDocuments(fs.readFileSync(path.join(kubeDir, file), 'utf8'))
    .map((d) => d.toJS() as KubeObject | null)
    .filter((o): o is KubeObject => o !== null);
}

/** The kubernetes-models class for an object (`apps/v1` + `StatefulSet` → kubernetes-models/apps/v1/StatefulSet). */
async function validatorFor(o: KubeObject): Promise<new (data: unknown) => { validate(): void }> {
  const module = (await import(`kubernetes-models/${o.apiVersion}/${o.kind}`)) as Record<string, new (data: unknown) => { validate(): void }>;
  const model = module[o.kind];
  if (!model) throw new Error(`no schema for ${o.apiVersion} ${o.kind}`);
  return model;
}

function defaultOf(name: string): unknown {
  const v = VARIABLES.find((d) => d.name === name);
  if (!v || v.defaultText === null) throw new Error(`${name} has no default`);
  return v.parse(v.defaultText);
}

/** A value as the pod would see it: Kubernetes' $(VAR) references filled with plausible values. */
function expand(value: string): string {
  return value.replace(/\$\(POD_NAME\)/g, 'exitpool-0').replace(/\$\(POD_NAMESPACE\)/g, 'default');
}

/** Every setting a manifest gives literally is a variable of the service, and parses. */
function expectValidSettings(env: Record<string, string>, where: string): void {
  for (const [name, raw] of Object.entries(env)) {
    const def = VARIABLES.find((d) => d.name === name || d.aliases?.includes(name));
    expect(def, `${where}: ${name} is a setting of the service`).to.not.equal(undefined);
    expect(() => def?.parse(expand(raw)), `${where}: ${name}=${raw}`).to.not.throw();
  }
}

describe('deploy/kubernetes: the manifests', () => {
  const kustomization = parseYaml(fs.readFileSync(path.join(kubeDir, 'kustomization.yaml'), 'utf8')) as { resources: string[] };
  const files = fs.readdirSync(kubeDir).filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml');
  const all = files.flatMap((f) => objectsIn(f).map((o) => ({ file: f, o })));

  it('kustomization.yaml lists every manifest but the secret example, and each exists', () => {
    expect([...kustomization.resources].sort()).to.deep.equal(files.filter((f) => !f.startsWith('secret')).sort());
  });

  it('every object is valid against its Kubernetes API schema', async () => {
    expect(all.length).to.be.at.least(6);
    for (const { file, o } of all) {
      const Model = await validatorFor(o);
      expect(() => new Model(o).validate(), `${file}: ${o.kind} ${o.metadata.name}`).to.not.throw();
    }
  });

  it('the schema check refuses a broken object (it is not a check that passes everything)', async () => {
    const sts = all.find(({ o }) => o.kind === 'StatefulSet' && o.metadata.name === 'exitpool')?.o as KubeObject;
    const Model = await validatorFor(sts);
    const broken = structuredClone(sts) as KubeObject & { spec: { replicas: unknown; template: { spec: { containers: { ports: unknown[] }[] } } } };
    broken.spec.replicas = 'three';
    expect(() => new Model(broken).validate()).to.throw(/replicas/);
    const noPortNumber = structuredClone(sts) as typeof broken;
    noPortNumber.spec.template.spec.containers[0]?.ports.push({ name: 'x' });
    expect(() => new Model(noPortNumber).validate()).to.throw(/containerPort/);
  });

  describe('the StatefulSet of nodes', () => {
    const sts = all.find(({ o }) => o.kind === 'StatefulSet' && o.metadata.name === 'exitpool')?.o as KubeObject & {
      spec: {
        replicas: number;
        serviceName: string;
        volumeClaimTemplates: { metadata: { name: string } }[];
        template: {
          metadata: { annotations: Record<string, string> };
          spec: {
            terminationGracePeriodSeconds: number;
            containers: {
              env: EnvVar[];
              ports: { name: string; containerPort: number }[];
              resources: { requests: Record<string, string>; limits: Record<string, string> };
              readinessProbe: { httpGet: { path: string; port: string } };
              startupProbe: { httpGet: { path: string; port: string } };
              volumeMounts: { name: string; mountPath: string }[];
            }[];
          };
        };
      };
    };
    const container = sts.spec.template.spec.containers[0] as (typeof sts.spec.template.spec.containers)[number];
    const literal = Object.fromEntries(container.env.filter((e) => e.value !== undefined && !e.name.startsWith('POD_')).map((e) => [e.name, e.value as string]));
    const env = (name: string): EnvVar | undefined => container.env.find((e) => e.name === name);

    it('runs several nodes, each named after its pod and reachable by its stable name', () => {
      expect(sts.spec.replicas).to.be.at.least(2);
      expect(env('POD_NAME')?.valueFrom?.fieldRef?.fieldPath).to.equal('metadata.name');
      expect(literal.NODE_NAME).to.equal('$(POD_NAME)');
      const headless = all.find(({ o }) => o.kind === 'Service' && o.metadata.name === sts.spec.serviceName)?.o as { spec: { clusterIP: string } } | undefined;
      expect(headless?.spec.clusterIP).to.equal('None');
      expect(literal.NODE_ADDRESS).to.include(`$(POD_NAME).${sts.spec.serviceName}.`);
    });

    it('gives only settings the service has, each in a form it accepts; credentials and the Redis URL from a Secret', () => {
      expectValidSettings(literal, 'exitpool.yaml');
      for (const secret of ['STATE_STORE', 'PROXY_TOKEN', 'ADMIN_PASSWORD', 'SIGNING_SECRET']) {
        expect(env(secret)?.valueFrom?.secretKeyRef, secret).to.not.equal(undefined);
        expect(VARIABLES.find((d) => d.name === secret)?.secret, `${secret} is a secret setting`).to.equal(true);
      }
    });

    it('the example Secret has every key the pods read, each a placeholder the service refuses (so a forgotten one stops the start)', () => {
      const example = objectsIn('secret.example.yaml')[0] as KubeObject & { stringData: Record<string, string> };
      const read = container.env.filter((e) => e.valueFrom?.secretKeyRef);
      expect(read.map((e) => e.name).sort()).to.deep.equal(['ADMIN_PASSWORD', 'PROXY_TOKEN', 'SIGNING_SECRET', 'STATE_STORE']);
      for (const e of read) {
        const key = e.valueFrom?.secretKeyRef?.key as string;
        expect(example.stringData, `secret key ${key}`).to.have.property(key);
        const def = VARIABLES.find((d) => d.name === e.name);
        expect(() => def?.parse(example.stringData[key] as string), `${e.name} from the example's ${key}`).to.throw(/placeholder/);
        // With the placeholder replaced by a real secret of the same shape, the value is accepted:
        // the refusal is the placeholder's, not the shape's.
        const filled = (example.stringData[key] as string).replace(/CHANGE-ME[-A-Za-z0-9]*/, 'Xq7fP2sLm9Rt4vWz8Yb3Nc6Hd1Kg5Je0');
        expect(() => def?.parse(filled), `${e.name} filled in`).to.not.throw();
      }
      // The Redis server's own password (redis.yaml) is the same placeholder as the URL's.
      expect(example.stringData['redis-password']).to.match(/CHANGE-ME/);
      expect(example.stringData['state-store']).to.include(`:${example.stringData['redis-password']}@`);
    });

    it('exposes the service’s ports, probes /health on the API, keeps DATA_DIR on its own volume, and is scraped', () => {
      const ports = Object.fromEntries(container.ports.map((p) => [p.name, p.containerPort]));
      expect(ports).to.deep.equal({ socks: defaultOf('SOCKS_PORT'), http: defaultOf('HTTP_PORT'), api: defaultOf('API_PORT'), hop: defaultOf('HOP_PORT') });
      expect(Number(literal.HOP_PORT)).to.equal(defaultOf('HOP_PORT'));
      expect(container.readinessProbe.httpGet).to.deep.equal({ path: '/health', port: 'api' });
      expect(container.startupProbe.httpGet).to.deep.equal({ path: '/health', port: 'api' });
      // DATA_DIR is a directory of the volume that the service makes itself (0700, its own): the
      // volume's root belongs to root and its fsGroup, and others may list it.
      const data = container.volumeMounts.find((m) => (literal.DATA_DIR ?? '').startsWith(`${m.mountPath}/`));
      expect(sts.spec.volumeClaimTemplates.map((v) => v.metadata.name)).to.include(data?.name);
      expect(path.posix.dirname(literal.DATA_DIR ?? ''), 'directly inside the volume').to.equal(data?.mountPath);
      expect(sts.spec.template.metadata.annotations).to.include({ 'prometheus.io/scrape': 'true', 'prometheus.io/path': '/metrics', 'prometheus.io/port': String(defaultOf('API_PORT')) });
      expect(container.resources.requests).to.have.keys('cpu', 'memory');
      expect(container.resources.limits).to.have.keys('cpu', 'memory');
    });

    it('runs as a user of its own whose group the volume is given (fsGroup), changed once per volume, not at every mount', () => {
      const security = (sts.spec.template.spec as unknown as { securityContext: Record<string, unknown> }).securityContext;
      expect(security).to.include({ runAsNonRoot: true, fsGroup: security.runAsGroup, fsGroupChangePolicy: 'OnRootMismatch' });
    });

    it('forwards between nodes on the hop listener: the headless Service names it, the clients’ Service never does', () => {
      type Service = KubeObject & { spec: { ports: { name: string; targetPort: string }[] } };
      const services = all.filter(({ o }) => o.kind === 'Service').map(({ o }) => o as Service);
      const headless = services.find((svc) => svc.metadata.name === sts.spec.serviceName) as Service;
      expect(headless.spec.ports.map((p) => p.targetPort)).to.deep.equal(['hop']);
      const clients = services.find((svc) => svc.metadata.name === 'exitpool') as Service;
      expect(clients.spec.ports.map((p) => p.targetPort)).to.not.include('hop');
    });

    it('a NetworkPolicy opens the hop listener to the fleet’s pods only, and nothing else besides the clients’ ports', () => {
      type Rule = { from?: { podSelector?: { matchLabels: Record<string, string> } }[]; ports?: { port: string | number }[] };
      type Policy = KubeObject & { spec: { podSelector: { matchLabels: Record<string, string> }; policyTypes: string[]; ingress: Rule[] } };
      const labels = (sts.spec as unknown as { selector: { matchLabels: Record<string, string> } }).selector.matchLabels;
      const policy = all.find(({ o }) => o.kind === 'NetworkPolicy' && o.metadata.name === 'exitpool')?.o as Policy;
      expect(policy.spec.podSelector.matchLabels).to.deep.equal(labels);
      expect(policy.spec.policyTypes).to.include('Ingress');
      for (const rule of policy.spec.ingress) {
        // A rule without ports would open every port, the hop listener's too.
        expect(rule.ports, 'every rule names its ports').to.not.equal(undefined);
        const ports = (rule.ports ?? []).map((p) => p.port);
        if (ports.includes('hop') || ports.includes(defaultOf('HOP_PORT') as number)) {
          expect(ports, 'the hop rule opens the hop port alone').to.deep.equal(['hop']);
          expect(rule.from).to.deep.equal([{ podSelector: { matchLabels: labels } }]);
        } else {
          expect(ports.sort()).to.deep.equal(['api', 'http', 'socks']);
        }
      }
    });

    it('gives a stopping pod the time the service needs (SHUTDOWN_GRACE, the workers, tor)', () => {
      const needed = (defaultOf('SHUTDOWN_GRACE') as number) + WORKER_EXIT_MARGIN_MS + DEFAULT_STOP_GRACE_MS;
      expect(sts.spec.template.spec.terminationGracePeriodSeconds * 1000).to.be.above(needed);
    });
  });
});

describe('deploy/kubernetes: the Redis of the fleet', () => {
  const objects = objectsIn('redis.yaml');

  it('keeps its data on a persistent volume with its append-only file, one pod at a time', () => {
    type Deployment = KubeObject & {
      spec: { strategy: { type: string }; template: { spec: { containers: { args: string[] }[]; volumes: { name: string; persistentVolumeClaim?: { claimName: string }; emptyDir?: unknown }[] } } };
    };
    const redis = objects.find((o) => o.kind === 'Deployment') as Deployment;
    const claim = objects.find((o) => o.kind === 'PersistentVolumeClaim');
    expect(redis.spec.template.spec.volumes).to.deep.equal([{ name: 'data', persistentVolumeClaim: { claimName: claim?.metadata.name } }]);
    expect(redis.spec.strategy.type, 'a ReadWriteOnce volume is not mounted by two pods').to.equal('Recreate');
    expect(redis.spec.template.spec.containers[0]?.args.join(' ')).to.include('--appendonly yes');
  });

  it('is reachable from the fleet’s pods only', () => {
    type Policy = KubeObject & { spec: { podSelector: { matchLabels: Record<string, string> }; ingress: { from: unknown[]; ports: unknown[] }[] } };
    const policy = objects.find((o) => o.kind === 'NetworkPolicy') as Policy;
    expect(policy.spec.podSelector.matchLabels).to.deep.equal({ 'app.kubernetes.io/name': 'exitpool-redis' });
    expect(policy.spec.ingress).to.deep.equal([{ from: [{ podSelector: { matchLabels: { 'app.kubernetes.io/name': 'exitpool' } } }], ports: [{ port: 'redis' }] }]);
  });
});

describe('deploy/compose: three nodes, Redis and HAProxy', () => {
  interface ComposeService {
    environment?: Record<string, string>;
    stop_grace_period?: string;
    ports?: string[];
  }
  const compose = parseYaml(fs.readFileSync(path.join(composeDir, 'compose.yaml'), 'utf8'), { merge: true }) as { services: Record<string, ComposeService> };
  const haproxy = fs.readFileSync(path.join(composeDir, 'haproxy.cfg'), 'utf8');
  const nodes = Object.entries(compose.services).filter(([name]) => name.startsWith('node-'));

  it('runs three nodes with their own names on one Redis, each setting one the service has', () => {
    expect(nodes.map(([name]) => name)).to.deep.equal(['node-1', 'node-2', 'node-3']);
    expect(new Set(nodes.map(([, s]) => s.environment?.NODE_NAME)).size).to.equal(3);
    expect(new Set(nodes.map(([, s]) => s.environment?.STATE_STORE)).size).to.equal(1);
    for (const [name, s] of nodes) {
      // What compose puts in for ${REDIS_PASSWORD:?…}: the operator's own password.
      const env = Object.fromEntries(Object.entries(s.environment ?? {}).map(([k, v]) => [k, v.replace(/\$\{REDIS_PASSWORD:\?[^}]*\}/g, 'Xq7fP2sLm9Rt4vWz')]));
      expectValidSettings(env, name);
      expect(env.NODE_ADDRESS, 'the others reach it by its service name').to.equal(name);
      const seconds = Number(/^(\d+)s$/.exec(s.stop_grace_period ?? '')?.[1]);
      expect(seconds * 1000).to.be.above((defaultOf('SHUTDOWN_GRACE') as number) + WORKER_EXIT_MARGIN_MS + DEFAULT_STOP_GRACE_MS);
    }
    expect(compose.services.redis).to.not.equal(undefined);
  });

  it('has no default Redis password: every use of REDIS_PASSWORD requires it to be set', () => {
    const text = fs.readFileSync(path.join(composeDir, 'compose.yaml'), 'utf8');
    const uses = [...text.matchAll(/\$\{REDIS_PASSWORD([^}]*)\}/g)].map((m) => m[1] as string);
    expect(uses.length, 'the nodes and the Redis server use it').to.be.at.least(2);
    for (const use of uses) expect(use, 'compose refuses to run without it (${VAR:?message})').to.match(/^:\?/);
    expect(text).to.not.match(/change-me/i);
  });

  it('balances the proxy ports over every node, and publishes on loopback only', () => {
    for (const port of [defaultOf('SOCKS_PORT'), defaultOf('HTTP_PORT')]) {
      for (const [name] of nodes) expect(haproxy, `${name}:${String(port)}`).to.include(`server ${name} ${name}:${String(port)}`);
    }
    expect(haproxy).to.match(/balance roundrobin/);
    for (const p of compose.services.haproxy?.ports ?? []) expect(p).to.match(/^127\.0\.0\.1:/);
    for (const [, s] of nodes) expect(s.ports, 'nodes publish nothing themselves').to.equal(undefined);
  });
});
