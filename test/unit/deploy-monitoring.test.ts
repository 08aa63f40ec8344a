/**
 * What an operator loads into Prometheus and Grafana: the alerting rules (deploy/prometheus,
 * and the same as a PrometheusRule in deploy/kubernetes/monitoring), the PodMonitor beside it,
 * and the Grafana dashboard. The rules and every query of the dashboard go through promtool
 * (Debian's prometheus package, which scripts/setup.sh installs); the alerts' own cases are in
 * test/prometheus/exitpool-rules.test.yaml.
 */
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const RULES = path.join(repo, 'deploy', 'prometheus', 'exitpool-rules.yaml');
const RULE_TESTS = path.join(repo, 'test', 'prometheus', 'exitpool-rules.test.yaml');
const MONITORING = path.join(repo, 'deploy', 'kubernetes', 'monitoring');
const DASHBOARD = path.join(repo, 'deploy', 'grafana-dashboard.json');

interface RuleGroups {
  groups: { name: string; rules: { alert?: string; record?: string; expr: string; for?: string; labels?: Record<string, string>; annotations?: Record<string, string> }[] }[];
}

function promtool(args: string[]): Promise<{ code: number; output: string }> {
  return new Promise((resolve, reject) => {
    execFile('promtool', args, { timeout: 60_000 }, (error, stdout, stderr) => {
      if (error && (error as NodeJS.ErrnoException).code === 'ENOENT') {
        reject(new Error("promtool is not installed: scripts/setup.sh installs it (Debian's prometheus package)"));
        return;
      }
      resolve({ code: error ? Number(error.code ?? 1) : 0, output: stdout + stderr });
    });
  });
}

const tempDirs: string[] = [];

function tempFile(name: string, text: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'exitpool-promtool-'));
  tempDirs.push(dir);
  const file = path.join(dir, name);
  fs.writeFileSync(file, text);
  return file;
}

function yamlOf<T>(file: string): T {
  return parseYaml(fs.readFileSync(file, 'utf8')) as T;
}

describe('deploy: alerting rules, the PrometheusRule and PodMonitor, the Grafana dashboard', function () {
  this.timeout(60_000);
  const plain = yamlOf<RuleGroups>(RULES);

  after(() => {
    for (const dir of tempDirs) fs.rmSync(dir, { recursive: true, force: true });
  });

  describe('alerting rules', () => {
    it('pass promtool check rules', async () => {
      const r = await promtool(['check', 'rules', RULES]);
      expect(r.code, r.output).to.equal(0);
      expect(r.output).to.include('SUCCESS');
    });

    it('fire on the series each is meant for, and stay quiet beside them (promtool test rules)', async () => {
      const r = await promtool(['test', 'rules', RULE_TESTS]);
      expect(r.code, r.output).to.equal(0);
    });

    it('promtool refuses a broken rule (the check is not one that passes everything)', async () => {
      const broken = structuredClone(plain);
      (broken.groups[0]?.rules[0] as { expr: string }).expr = 'sum by (job (pool_instances_routable)';
      const r = await promtool(['check', 'rules', tempFile('broken.yaml', stringifyYaml(broken))]);
      expect(r.code).to.not.equal(0);
    });

    it('alert on the pool below MIN_ROUTABLE, bans per hour, state write failures, a lost fleet node and an unreachable Redis, each with a severity and a summary', () => {
      const rules = plain.groups.flatMap((g) => g.rules);
      const byName = new Map(rules.map((r) => [r.alert, r]));
      const wanted: Record<string, string> = {
        ExitpoolBelowMinRoutable: 'pool_min_routable',
        ExitpoolExitBansHigh: 'pool_exit_bans_total[1h]',
        ExitpoolStateWriteFailing: 'pool_state_write_failures_total',
        ExitpoolFleetNodeLost: 'pool_fleet_nodes',
        ExitpoolRedisUnreachable: 'pool_redis_reachable',
      };
      for (const [alert, reads] of Object.entries(wanted)) {
        expect(byName.get(alert)?.expr, alert).to.include(reads);
      }
      for (const rule of rules) {
        expect(rule.labels?.severity, `${rule.alert} severity`).to.be.oneOf(['warning', 'critical']);
        expect(rule.annotations?.summary, `${rule.alert} summary`).to.be.a('string');
        expect(rule.for, `${rule.alert} waits before firing`).to.match(/^\d+m$/);
      }
    });
  });

  describe('deploy/kubernetes/monitoring (Prometheus Operator)', () => {
    const rule = yamlOf<{ apiVersion: string; kind: string; metadata: { name: string }; spec: RuleGroups }>(path.join(MONITORING, 'prometheus-rule.yaml'));
    const podMonitor = yamlOf<{ apiVersion: string; kind: string; spec: { selector: { matchLabels: Record<string, string> }; podMetricsEndpoints: { port: string; path: string }[] } }>(
      path.join(MONITORING, 'pod-monitor.yaml'),
    );

    it('the PrometheusRule carries exactly the plain file’s groups, which promtool accepts', async () => {
      expect(rule.kind).to.equal('PrometheusRule');
      expect(rule.spec.groups).to.deep.equal(plain.groups);
      const r = await promtool(['check', 'rules', tempFile('from-prometheus-rule.yaml', stringifyYaml({ groups: rule.spec.groups }))]);
      expect(r.code, r.output).to.equal(0);
    });

    it('both objects are valid against the Prometheus Operator’s schemas, and the kustomization lists both', async () => {
      const { PrometheusRule, PodMonitor } = await import('@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1');
      expect(() => new PrometheusRule(rule as never).validate()).to.not.throw();
      expect(() => new PodMonitor(podMonitor as never).validate()).to.not.throw();
      expect(() => new PodMonitor({ ...podMonitor, spec: { ...podMonitor.spec, podMetricsEndpoints: 'api' } } as never).validate(), 'a broken one is refused').to.throw();
      const kustomization = yamlOf<{ resources: string[] }>(path.join(MONITORING, 'kustomization.yaml'));
      expect([...kustomization.resources].sort()).to.deep.equal(['pod-monitor.yaml', 'prometheus-rule.yaml']);
    });

    it('the PodMonitor scrapes /metrics on the API port of the StatefulSet’s pods', () => {
      const manifests = fs.readFileSync(path.join(repo, 'deploy', 'kubernetes', 'exitpool.yaml'), 'utf8');
      const sts = manifests
        .split(/^---$/m)
        .map((doc) => parseYaml(doc) as { kind?: string; spec?: { template: { metadata: { labels: Record<string, string> }; spec: { containers: { ports: { name: string }[] }[] } } } } | null)
        .find((o) => o?.kind === 'StatefulSet');
      const template = sts?.spec?.template;
      expect(template?.metadata.labels).to.deep.include(podMonitor.spec.selector.matchLabels);
      const endpoint = podMonitor.spec.podMetricsEndpoints[0];
      expect(endpoint?.path).to.equal('/metrics');
      expect(template?.spec.containers[0]?.ports.map((p) => p.name)).to.include(endpoint?.port);
    });
  });

  describe('the Grafana dashboard', () => {
    interface Target {
      expr: string;
      legendFormat: string;
    }
    const dashboard = JSON.parse(fs.readFileSync(DASHBOARD, 'utf8')) as {
      templating: { list: { name: string; type: string; multi?: boolean; includeAll?: boolean; allValue?: string; query?: { query: string } | string }[] };
      panels: { title: string; targets: Target[] }[];
    };
    const targets = dashboard.panels.flatMap((p) => p.targets.map((t) => ({ panel: p.title, ...t })));

    it('has a node variable: any number of nodes of a fleet, or all', () => {
      const node = dashboard.templating.list.find((v) => v.name === 'node');
      expect(node, 'a variable named node').to.not.equal(undefined);
      expect(node).to.include({ type: 'query', multi: true, includeAll: true, allValue: '.*' });
      expect(typeof node?.query === 'object' ? node.query.query : node?.query).to.match(/^label_values\(pool_\w+, node\)$/);
    });

    it('every query selects the chosen nodes and sums by node (or by what it draws), so a fleet is not one line per pod', () => {
      expect(targets.length).to.be.at.least(20);
      for (const t of targets) {
        const selectors = [...t.expr.matchAll(/\b(pool_[a-z0-9_]+)(\{[^}]*\})?/g)];
        expect(selectors.length, `${t.panel}: ${t.expr}`).to.be.at.least(1);
        for (const [whole, , labels] of selectors) expect(labels, `${t.panel}: ${whole} filters on $node`).to.include('node=~"$node"');
        expect(t.expr, `${t.panel}: aggregated`).to.match(/^(histogram_quantile\([0-9.]+, )?(sum|max|min) by \(/);
      }
      const byNode = targets.filter((t) => /(sum|max|min) by \(node\b/.test(t.expr)).length;
      expect(byNode / targets.length, 'nearly every query is drawn per node').to.be.above(0.8);
    });

    it('has panels for exits (dead ones and egress probes too), bans, countries and verdicts (blamed on the destination, scored or not, quarantines)', () => {
      const reads = (metric: string): string[] => dashboard.panels.filter((p) => p.targets.some((t) => t.expr.includes(metric))).map((p) => p.title);
      for (const metric of [
        'pool_exits_in_use',
        'pool_exits_down',
        'pool_exit_deaths_total',
        'pool_egress_probes_total',
        'pool_exits_banned',
        'pool_exit_bans_total',
        'pool_sessions_by_country',
        'pool_country_refusals_total',
        'pool_failures_blamed_on_destination_total',
        'pool_failure_reports_total',
        'pool_quarantines_total',
        'pool_min_routable',
        'pool_fleet_nodes',
        'pool_redis_reachable',
      ]) {
        expect(reads(metric), `a panel draws ${metric}`).to.not.deep.equal([]);
      }
    });

    it('every query is valid PromQL (promtool, with the variables filled in)', async () => {
      const rules = targets.map((t, i) => ({
        record: `dashboard:query_${i}`,
        expr: t.expr.replaceAll('$__rate_interval', '2m').replaceAll('$node', '.*'),
      }));
      const r = await promtool(['check', 'rules', tempFile('dashboard-queries.yaml', stringifyYaml({ groups: [{ name: 'dashboard', rules }] }))]);
      expect(r.code, r.output).to.equal(0);
    });
  });
});
