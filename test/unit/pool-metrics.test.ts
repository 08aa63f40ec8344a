/**
 * The /metrics exposition (supervisor/metrics/pool-metrics.ts) from fake sources: the names the
 * SPEC fixes, Prometheus' naming conventions for the rest, the default process metrics under
 * `pool_` with their doubled-prefix names kept one release, and the figures the alert rules
 * (deploy/prometheus) read.
 */
import { expect } from 'chai';
import { PoolMetrics, underDeprecatedNames, type MetricsSource } from '../../supervisor/metrics/pool-metrics.js';
import { parsePrometheusText, samplesOf, type MetricFamily } from '../support/parsers/prometheus-text.js';

function source(extra: Partial<MetricsSource> = {}): MetricsSource {
  return {
    instanceViews: () => [],
    lifetime: () => null,
    quarantineScore: () => 5,
    totals: () => ({ requests: 0, failures: 0, bytesUp: 0, bytesDown: 0 }),
    sessionCount: () => 0,
    routableCount: () => 3,
    workerRestarts: () => 0,
    workers: () => [],
    connectionLimitPerWorker: 8192,
    ...extra,
  };
}

async function scrape(metrics: PoolMetrics): Promise<Map<string, MetricFamily>> {
  return parsePrometheusText((await metrics.text()).text);
}

function value(families: Map<string, MetricFamily>, name: string, labels: Record<string, string> = {}): number | undefined {
  const found = samplesOf(families, name, labels);
  expect(found.length, `${name} ${JSON.stringify(labels)}: at most one sample`).to.be.at.most(1);
  return found[0]?.value;
}

/** Named by the SPEC (and so kept whatever the conventions say): `pool_instances_total` is a gauge. */
const SPEC_NAMES = [
  'pool_instances_routable',
  'pool_instances_total',
  'pool_instance_failures_total',
  'pool_instance_failure_kinds_total',
  'pool_instance_failure_score',
  'pool_quarantine_score',
  'pool_instance_remediations_total',
];

describe('metrics: names and the figures the alerts read', () => {
  it('serves every name the SPEC lists, with its type', async () => {
    const families = await scrape(new PoolMetrics(source()));
    for (const name of SPEC_NAMES) expect(families.has(name), name).to.equal(true);
    expect(families.get('pool_instances_total')?.type).to.equal('gauge');
    expect(families.get('pool_instance_failures_total')?.type).to.equal('counter');
  });

  it('the process metrics are pool_process_*, pool_nodejs_*: no doubled prefix but for the deprecated copies', async () => {
    const families = await scrape(new PoolMetrics(source()));
    expect(families.get('pool_process_cpu_seconds_total')?.type).to.equal('counter');
    expect(families.get('pool_process_resident_memory_bytes')?.type).to.equal('gauge');
    expect(families.get('pool_nodejs_eventloop_lag_seconds')?.type).to.equal('gauge');
    expect(value(families, 'pool_process_cpu_seconds_total')).to.be.above(0);
  });

  it('keeps every old name (pool_process_process_*, pool_process_nodejs_*) for one release: same type and samples, HELP naming the new one', async () => {
    const families = await scrape(new PoolMetrics(source({ node: 'n1' })));
    const deprecated = [...families.values()].filter((f) => f.help.startsWith('Deprecated'));
    expect(deprecated.map((f) => f.name)).to.include.members(['pool_process_process_cpu_seconds_total', 'pool_process_process_resident_memory_bytes', 'pool_process_nodejs_eventloop_lag_seconds', 'pool_instance_bootstrap_percent']);
    for (const old of deprecated.filter((f) => f.name.startsWith('pool_process_'))) {
      const renamed = `pool_${old.name.slice('pool_process_'.length)}`;
      const current = families.get(renamed);
      expect(current, `${old.name} has its new name ${renamed}`).to.not.equal(undefined);
      expect(old.help).to.equal(`Deprecated (removed in the next release): ${renamed}. ${current?.help}`);
      expect(old.type).to.equal(current?.type);
      expect(old.samples.map((s) => ({ ...s, name: s.name.replace(/^pool_process_/, 'pool_') }))).to.deep.equal(current?.samples);
      for (const s of old.samples) expect(s.labels.node, `${s.name} carries node`).to.equal('n1');
    }
    // Nothing else is doubled.
    const doubled = [...families.keys()].filter((n) => n.startsWith('pool_process_process_') || n.startsWith('pool_process_nodejs_'));
    expect(doubled.every((n) => families.get(n)?.help.startsWith('Deprecated'))).to.equal(true);
  });

  it('renames exposition lines, not label values or other text', () => {
    const text = '# HELP pool_process_open_fds Number of open file descriptors.\n# TYPE pool_process_open_fds gauge\npool_process_open_fds{node="pool_x"} 7\n';
    expect(underDeprecatedNames(text)).to.equal(
      '# HELP pool_process_process_open_fds Deprecated (removed in the next release): pool_process_open_fds. Number of open file descriptors.\n' +
        '# TYPE pool_process_process_open_fds gauge\npool_process_process_open_fds{node="pool_x"} 7\n',
    );
  });

  it('follows the conventions beyond the SPEC: _total only on counters, base units, ratios from 0 to 1', async () => {
    const views = [{ id: 0, bootstrap: 45, ready: false, sessions: 0, health: { state: 'healthy', failure_score: 0 } }] as unknown as ReturnType<MetricsSource['instanceViews']>;
    const families = await scrape(new PoolMetrics(source({ instanceViews: () => views })));
    for (const f of families.values()) {
      if (f.help.startsWith('Deprecated')) continue;
      // prom-client's default metrics keep the names every Node.js dashboard knows (three of its
      // gauges end in _total), behind the prefix: docs/operations.md says so.
      if (/^pool_(process|nodejs)_/.test(f.name)) continue;
      if (f.type === 'counter') expect(f.name, `${f.name} is a counter`).to.match(/_total$/);
      else if (!SPEC_NAMES.includes(f.name)) expect(f.name, `${f.name} is a ${f.type}`).to.not.match(/_total$/);
      expect(f.name, f.name).to.not.match(/_(percent|milliseconds|ms|kilobytes|megabytes)$/);
    }
    expect(value(families, 'pool_instance_bootstrap_ratio', { instance: '0' })).to.equal(0.45);
    expect(value(families, 'pool_instance_bootstrap_percent', { instance: '0' })).to.equal(45);
  });

  it('serves MIN_ROUTABLE, the bans made, the exits found dead and the egress probes, counts quarantines and failure reports (scored or not)', async () => {
    let exitReads = 0;
    const metrics = new PoolMetrics(
      source({
        minRoutable: () => 2,
        exitCounts: () => {
          exitReads++;
          return { inUse: 4, banned: 1, eligible: 9, catalog: 12, bansMade: 3, down: { down: 2, probation: 1 }, deathsFound: 5, egressProbes: { probes: 7, failed: 2 } };
        },
      }),
    );
    metrics.quarantined('score');
    metrics.quarantined('score');
    metrics.quarantined('manual');
    metrics.failureReported('captcha', true);
    metrics.failureReported('captcha', false);
    metrics.failureReported('captcha', false);
    const families = await scrape(metrics);
    expect(exitReads, 'the exit figures read once for the scrape, not once per exit metric').to.equal(1);
    expect(value(families, 'pool_min_routable')).to.equal(2);
    expect(value(families, 'pool_exit_bans_total')).to.equal(3);
    expect(families.get('pool_exit_bans_total')?.type).to.equal('counter');
    expect(value(families, 'pool_exits_banned')).to.equal(1);
    expect(value(families, 'pool_exits_down', { state: 'down' })).to.equal(2);
    expect(value(families, 'pool_exits_down', { state: 'probation' })).to.equal(1);
    expect(value(families, 'pool_exit_deaths_total')).to.equal(5);
    expect(families.get('pool_exit_deaths_total')?.type).to.equal('counter');
    expect(value(families, 'pool_egress_probes_total', { outcome: 'ok' })).to.equal(5);
    expect(value(families, 'pool_egress_probes_total', { outcome: 'failed' })).to.equal(2);
    expect(value(families, 'pool_quarantines_total', { cause: 'score' })).to.equal(2);
    expect(value(families, 'pool_quarantines_total', { cause: 'manual' })).to.equal(1);
    expect(value(families, 'pool_failure_reports_total', { kind: 'captcha', scored: 'true' })).to.equal(1);
    expect(value(families, 'pool_failure_reports_total', { kind: 'captcha', scored: 'false' })).to.equal(2);
  });

  it('state write failures with a durable store, fleet nodes and Redis with a fleet; absent otherwise (never a false 0)', async () => {
    const alone = await scrape(new PoolMetrics(source()));
    for (const name of ['pool_state_write_failures_total', 'pool_fleet_nodes', 'pool_redis_reachable']) expect(alone.has(name), name).to.equal(false);

    let reachable = true;
    const fleetNode = new PoolMetrics(source({ node: 'b', stateWriteFailures: () => 4, fleet: () => ({ nodes: 3, redisReachable: reachable }) }));
    let families = await scrape(fleetNode);
    expect(value(families, 'pool_state_write_failures_total', { node: 'b' })).to.equal(4);
    expect(families.get('pool_state_write_failures_total')?.type).to.equal('counter');
    expect(value(families, 'pool_fleet_nodes', { node: 'b' })).to.equal(3);
    expect(value(families, 'pool_redis_reachable', { node: 'b' })).to.equal(1);
    reachable = false;
    families = await scrape(fleetNode);
    expect(value(families, 'pool_redis_reachable', { node: 'b' })).to.equal(0);
  });

  it("counts the tors' control-port events by event name", async () => {
    const counts = new Map([
      ['CIRC', 12],
      ['STREAM', 40],
    ]);
    const families = await scrape(new PoolMetrics(source({ controlEvents: () => counts })));
    expect(families.get('pool_tor_control_events_total')?.type).to.equal('counter');
    expect(value(families, 'pool_tor_control_events_total', { event: 'CIRC' })).to.equal(12);
    expect(value(families, 'pool_tor_control_events_total', { event: 'STREAM' })).to.equal(40);
    counts.set('STREAM', 41);
    expect(value(await scrape(new PoolMetrics(source({ controlEvents: () => counts }))), 'pool_tor_control_events_total', { event: 'STREAM' })).to.equal(41);
  });
});
