import { expect } from 'chai';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { AUDIT_TYPES, type AuditEvent } from '../../shared/api/audit-event.js';
import type { InstanceView } from '../../shared/api/views.js';
import { HealApi } from '../support/clients/api-client.js';
import { exitIpOf } from '../support/clients/session-fetch.js';
import { pollUntil } from '../support/waiting.js';
import { PrometheusTextError, parsePrometheusText, samplesOf } from '../support/parsers/prometheus-text.js';
import { StreamClient } from '../support/clients/sse-frames.js';
import { withService } from '../support/fixtures/service.js';

/** Small pool, short windows: everything below happens in seconds, not minutes. */
const SERVICE_ENV = {
  POOL_SIZE: '3',
  FAILURE_WINDOW: '60s',
  REMEDIATION_BACKOFF_BASE: '2s',
  BOOTSTRAP_STALL_TIMEOUT: '30s',
};
/** A rotation waits out tor's ~10 s NEWNYM cooldown, then builds a circuit. */
const ROTATION_DEADLINE_MS = 60_000;
const BOOTSTRAP_DEADLINE_MS = 90_000;

describe('the Prometheus text reader used by the /metrics test', () => {
  const ok = '# HELP a_total A counter.\n# TYPE a_total counter\na_total{x="q\\"\\\\\\n"} 3\n';
  it('accepts a well-formed exposition and unescapes label values', () => {
    const f = parsePrometheusText(ok);
    expect(f.get('a_total')?.samples[0]?.labels.x).to.equal('q"\\\n');
  });
  it('reads NaN and infinities in any case, as Prometheus (Go ParseFloat) does', () => {
    const f = parsePrometheusText('# TYPE g gauge\ng{x="a"} Nan\ng{x="b"} NaN\ng{x="c"} +Inf\ng{x="d"} -inf\n');
    const values = f.get('g')?.samples.map((x) => x.value);
    expect(Number.isNaN(values?.[0])).to.equal(true);
    expect(Number.isNaN(values?.[1])).to.equal(true);
    expect(values?.slice(2)).to.deep.equal([Infinity, -Infinity]);
  });
  for (const [what, text] of [
    ['a sample of an undeclared family', 'b 1\n'],
    ['a counter not named _total', '# TYPE a counter\na 1\n'],
    ['a bad label escape', '# TYPE a gauge\na{x="\\t"} 1\n'],
    ['an unquoted label value', '# TYPE a gauge\na{x=1} 1\n'],
    ['a duplicate series', '# TYPE a gauge\na{x="1"} 1\na{x="1"} 2\n'],
    ['non-contiguous families', '# TYPE a gauge\n# TYPE b gauge\nb 1\na 1\n'],
    ['a bad value', '# TYPE a gauge\na one\n'],
    ['a histogram without +Inf', '# TYPE h histogram\nh_bucket{le="1"} 1\nh_sum 1\nh_count 1\n'],
    ['a missing final newline', '# TYPE a gauge\na 1'],
  ] as const) {
    it(`refuses ${what}`, () => {
      expect(() => parsePrometheusText(text)).to.throw(PrometheusTextError);
    });
  }
});

describe('management API end to end (pool of 3 on the private network)', function () {
  this.timeout(240_000);
  let api: HealApi;
  let keySeq = 0;

  /** Sends one request under a fresh key; returns where the pool put it and which exit answered. */
  async function placeSession(prefix: string): Promise<{ key: string; instance: number; ip: string }> {
    const key = `${prefix}-${++keySeq}`;
    const ip = await exitIpOf(suite.svc, key);
    return { key, instance: (await api.session(key)).instance, ip };
  }

  /** Until every instance is routable again (rotations and remediations of earlier tests done). */
  async function settled(size: number): Promise<void> {
    await pollUntil('all instances routable', () => api.pool(), ROTATION_DEADLINE_MS, { until: (p) => p.size === size && p.routable === size });
  }

  const suite = withService(SERVICE_ENV, { ready: 3, readyTimeoutMs: BOOTSTRAP_DEADLINE_MS });
  before(async () => {
    api = await HealApi.signIn(suite.svc);
  });
  afterEach(() => suite.svc?.net.whoami.clearBehaviours());

  it('serves /metrics as valid Prometheus text carrying the pool and health metrics', async () => {
    const s = await placeSession('metrics');
    const report = await api.reportFailure(s.key); // bodyless: counts as other
    expect(report.kind).to.equal('other');
    // Proxy workers send their accounting in batches: scrape until the request has arrived.
    const scrape = async (): Promise<ReturnType<typeof parsePrometheusText>> => {
      const m = await api.metricsText();
      expect(m.status).to.equal(200);
      expect(m.contentType).to.match(/^text\/plain; version=0\.0\.4/);
      return parsePrometheusText(m.text);
    };
    const families = await pollUntil('the request in pool_requests_total', scrape, 10_000, { until: (f) => (samplesOf(f, 'pool_requests_total')[0]?.value ?? 0) >= 1 });
    const one = (name: string, labels: Record<string, string> = {}): number => {
      const found = samplesOf(families, name, labels);
      expect(found, `${name} ${JSON.stringify(labels)}`).to.have.length(1);
      return (found[0] as { value: number }).value;
    };
    expect(families.get('pool_instances_routable')?.type).to.equal('gauge');
    expect(one('pool_instances_routable')).to.equal(3);
    expect(one('pool_instances_total')).to.equal(3);
    expect(one('pool_quarantine_score')).to.equal(5);
    expect(families.get('pool_instance_failures_total')?.type).to.equal('counter');
    for (const id of ['0', '1', '2']) {
      one('pool_instance_failures_total', { instance: id, source: 'client' });
      one('pool_instance_failures_total', { instance: id, source: 'transport' });
      one('pool_instance_failure_score', { instance: id });
      one('pool_instance_remediations_total', { instance: id });
    }
    const at = String(s.instance);
    expect(one('pool_instance_failures_total', { instance: at, source: 'client' })).to.be.at.least(1);
    expect(one('pool_instance_failure_kinds_total', { instance: at, kind: 'other' })).to.be.at.least(1);
    expect(one('pool_instance_failure_score', { instance: at })).to.equal(1);
    expect(families.get('pool_instance_failure_kinds_total')?.type).to.equal('counter');
    expect(families.get('pool_instance_remediations_total')?.type).to.equal('counter');
    expect(families.get('pool_dial_latency_seconds')?.type).to.equal('histogram');
    // What the alert rules read (deploy/prometheus): MIN_ROUTABLE's default 25% of 3 is 1; the
    // report above counted as scored; the durable state (sqlite) has not failed.
    expect(one('pool_min_routable')).to.equal(1);
    expect(one('pool_failure_reports_total', { kind: 'other', scored: 'true' })).to.be.at.least(1);
    expect(one('pool_state_write_failures_total')).to.equal(0);
    expect(families.get('pool_exit_bans_total')?.type).to.equal('counter');
    expect(families.get('pool_process_cpu_seconds_total')?.type).to.equal('counter');
    // Release clears the failure again so later tests start from a clean window.
    const released = await api.action(s.instance, 'release');
    expect(released.health.failure_score).to.equal(0);
  });

  it('reports every worker process, and the client connections each proxy worker holds against its limit', async () => {
    const scrape = async (): Promise<ReturnType<typeof parsePrometheusText>> => parsePrometheusText((await api.metricsText()).text);
    const held = (f: ReturnType<typeof parsePrometheusText>): number => samplesOf(f, 'pool_proxy_worker_connections').reduce((sum, x) => sum + x.value, 0);
    // A client in mid-handshake holds a place in its worker's budget.
    const client = net.connect({ host: '127.0.0.1', port: suite.svc.socksPort });
    await new Promise<void>((resolve, reject) => {
      client.once('connect', resolve);
      client.once('error', reject);
    });
    client.write(Buffer.from([5, 1, 2]));
    try {
      const families = await pollUntil('the held connection in pool_proxy_worker_connections', scrape, 10_000, { until: (f) => held(f) >= 1 });
      expect(samplesOf(families, 'pool_proxy_worker_connection_limit')[0]?.value).to.equal(8192);
      expect(families.get('pool_worker_cpu_seconds_total')?.type).to.equal('counter');
      for (const role of ['api', 'proxy']) {
        const memory = samplesOf(families, 'pool_worker_resident_memory_bytes', { role });
        expect(memory.length, `${role} workers reported`).to.be.at.least(1);
        for (const m of memory) expect(m.value, `${role} worker RSS`).to.be.above(10 * 2 ** 20);
        for (const fds of samplesOf(families, 'pool_worker_open_fds', { role })) expect(fds.value).to.be.above(0);
        for (const cpu of samplesOf(families, 'pool_worker_cpu_seconds_total', { role })) expect(cpu.value).to.be.above(0);
      }
    } finally {
      client.destroy();
    }
    await pollUntil('the connection gone from pool_proxy_worker_connections', scrape, 10_000, { until: (f) => held(f) === 0 });
  });

  it('serves every metric that the Grafana dashboard, the operations guide and the alert rules name', async () => {
    const families = parsePrometheusText((await api.metricsText()).text);
    // A histogram's series carry suffixes; the family is what the exposition declares.
    const family = (name: string): string => name.replace(/_(bucket|sum|count)$/, '');
    const named = (text: string): string[] => [...new Set([...text.matchAll(/\bpool_[a-z0-9_]+/g)].map((m) => family(m[0])))];
    const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
    const sources: Record<string, string> = {
      'deploy/grafana-dashboard.json': fs.readFileSync(path.join(root, 'deploy', 'grafana-dashboard.json'), 'utf8'),
      'docs/operations.md': fs.readFileSync(path.join(root, 'docs', 'operations.md'), 'utf8'),
      'deploy/prometheus/exitpool-rules.yaml': fs.readFileSync(path.join(root, 'deploy', 'prometheus', 'exitpool-rules.yaml'), 'utf8'),
    };
    // Served by a node of a fleet only (STATE_STORE=redis://…): test/unit/pool-metrics.test.ts.
    const fleetOnly = ['pool_fleet_nodes', 'pool_redis_reachable'];
    for (const [file, text] of Object.entries(sources)) {
      const names = named(text).filter((n) => !n.endsWith('_') && !fleetOnly.includes(n)); // "pool_process_*" is a prefix
      expect(names.length, `${file} names metrics`).to.be.at.least(5);
      for (const name of names) expect(families.has(name), `${file} names ${name}, which /metrics does not serve`).to.equal(true);
    }
  });

  it('reads the audit log newest first and refuses a bad limit with 400', async () => {
    for (const bad of ['0', '1001', 'x', '-1', '1.5', '']) {
      const r = await api.raw(`/api/events?limit=${bad}`);
      expect(r.status, `limit=${bad}`).to.equal(400);
      expect(r.headers.get('content-type')).to.match(/^text\/plain/);
      await r.text();
    }
    const all = await api.events();
    expect(all.length).to.be.within(2, 100);
    for (let i = 1; i < all.length; i++) {
      const [newer, older] = [all[i - 1] as AuditEvent, all[i] as AuditEvent];
      expect(newer.id).to.be.greaterThan(older.id);
      expect(Date.parse(newer.time)).to.be.at.least(Date.parse(older.time));
    }
    for (const e of all) {
      expect(AUDIT_TYPES).to.include(e.type);
      expect(e.time).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      expect(e.message).to.be.a('string');
      expect(e.message.length).to.be.greaterThan(0);
      expect(e.details).to.be.an('object');
    }
    const newest = await api.events(1);
    expect(newest).to.have.length(1);
    expect(newest[0]?.id).to.be.at.least((all[0] as AuditEvent).id);
    expect((await api.events(1000)).length).to.be.at.least(all.length);
    // The release of the previous test is on record, with its instance.
    expect(all.some((e) => e.type === 'instance' && /released/.test(e.message) && e.instance !== null)).to.equal(true);
  });

  it('streams state about every second and the event of an action the subscriber triggers', async () => {
    const ticket = await api.json<{ ticket: string; expires_in: number }>('/api/auth/ticket', { method: 'POST' });
    expect(ticket.expires_in).to.equal(60);
    const elsewhere = await api.raw(`/api/pool?ticket=${encodeURIComponent(ticket.ticket)}`, { bearer: null });
    expect(elsewhere.status, 'a ticket is a credential for the stream only').to.equal(401);
    await elsewhere.text();

    // A normal credential works on the stream too, in the header.
    const withHeader = await StreamClient.open(`http://127.0.0.1:${suite.svc.apiPort}/api/stream`, { Authorization: `Bearer ${api.adminBearer}` });
    await withHeader.waitFor('a state frame (header credential)', (f) => f.event === 'state', 10_000).finally(() => withHeader.close());

    const s = await placeSession('stream');
    const stream = await StreamClient.open(`http://127.0.0.1:${suite.svc.apiPort}/api/stream?ticket=${encodeURIComponent(ticket.ticket)}`);
    try {
      expect(stream.contentType).to.match(/^text\/event-stream/);
      const opened = Date.now();
      const states = async (n: number): Promise<void> => {
        await stream.waitFor(`#${n} state`, () => stream.frames.filter((f) => f.event === 'state').length >= n, 15_000);
      };
      await states(5);
      const live = stream.frames.filter((f) => f.event === 'state' && f.at > opened + 50);
      const gaps = live.slice(1).map((f, i) => f.at - (live[i] as { at: number }).at);
      const mean = gaps.reduce((a, b) => a + b, 0) / gaps.length;
      // "Roughly every second" (TICK_MS): never faster; a loaded machine only makes it slower.
      expect(mean, `gaps ${gaps.join(', ')} ms`).to.be.at.least(600);
      const snapshot = (live[live.length - 1] as { data: { pool: { size: number }; instances: InstanceView[]; stats: unknown } }).data;
      expect(snapshot.pool.size).to.equal(3);
      expect(snapshot.instances.map((i) => i.id)).to.deep.equal([0, 1, 2]);
      expect(snapshot).to.have.property('stats');

      const from = stream.frames.length;
      const drained = await api.action(s.instance, 'drain');
      expect(drained.sessions).to.equal(0);
      const draining = await stream.waitFor(
        'instance event of the drain',
        (f) => f.event === 'event' && (f.data as AuditEvent).type === 'instance' && (f.data as AuditEvent).instance === s.instance && /drain/.test((f.data as AuditEvent).message),
        10_000,
        from,
      );
      const moved = await stream.waitFor(
        'assignment event of the drained session',
        (f) => f.event === 'event' && (f.data as AuditEvent).type === 'assignment' && (f.data as AuditEvent).session === s.key,
        10_000,
        from,
      );
      expect((moved.data as AuditEvent).details).to.include({ from: s.instance, reason: 'drain' });
      expect((draining.data as AuditEvent).id).to.be.a('number');
    } finally {
      await stream.close();
    }
    await api.action(s.instance, 'release');
    await settled(3);
  });

  it('quarantines, releases and drains an instance: state, routable count, sessions, /health', async () => {
    await settled(3);
    const placed = [];
    for (let i = 0; i < 6; i++) placed.push(await placeSession('qrd'));
    const target = (placed[0] as { instance: number }).instance;
    const onTarget = placed.filter((p) => p.instance === target).map((p) => p.key);

    // The duplicate goes out with the first: with pinned exits the ladder's first rung can bring the
    // instance back to probation (routable, so quarantinable again) within a hundred milliseconds.
    const both = await Promise.all([0, 1].map(() => api.raw(`/api/instances/${target}/quarantine`, { method: 'POST' })));
    expect(both.map((res) => res.status).sort(), 'a quarantine and a duplicate sent with it').to.deep.equal([200, 409]);
    const accepted = both.find((res) => res.status === 200) as Response;
    const refused = both.find((res) => res.status === 409) as Response;
    expect(await refused.text()).to.match(/only a routable instance can be quarantined/);
    const q = (await accepted.json()) as InstanceView;
    expect(['quarantined', 'remediating']).to.include(q.health.state);
    expect(q.sessions).to.equal(0);
    expect((await api.pool()).routable).to.equal(2);
    for (const key of onTarget) expect((await api.session(key)).instance, key).to.not.equal(target);
    expect(await api.health()).to.equal(200);
    const events = await api.events(50);
    expect(events.some((e) => e.type === 'quarantine' && e.instance === target)).to.equal(true);
    // A moved session keeps working on its new instance.
    await exitIpOf(suite.svc, onTarget[0] as string);

    const r = await api.action(target, 'release');
    expect(r.health.state).to.equal('healthy');
    expect(r.health.failure_score).to.equal(0);
    await settled(3);

    const drainTarget = (await api.instances()).find((i) => i.sessions > 0) as InstanceView;
    const before = drainTarget.health.state;
    const keys = (await api.sessions()).filter((s) => s.instance === drainTarget.id).map((s) => s.key);
    const d = await api.action(drainTarget.id, 'drain');
    expect(d.health.state, 'drain leaves the health state alone').to.equal(before);
    expect(d.sessions).to.equal(0);
    expect((await api.pool()).routable).to.equal(2);
    for (const key of keys) expect((await api.session(key)).instance).to.not.equal(drainTarget.id);
    await api.action(drainTarget.id, 'release');
    await settled(3);

    for (const [path, status] of [
      ['/api/instances/99/drain', 404],
      ['/api/instances/99/quarantine', 404],
      ['/api/instances/abc/release', 400],
    ] as const) {
      const res = await api.raw(path, { method: 'POST' });
      expect(res.status, path).to.equal(status);
      await res.text();
    }
  });

  it('rotates an instance: answers after its sessions moved, then a new exit appears', async () => {
    await settled(3);
    let target: InstanceView | undefined;
    for (let i = 0; i < 6 && !target; i++) {
      await placeSession('rot');
      target = (await api.instances()).find((x) => x.sessions > 0 && x.exit_ip !== '');
    }
    if (!target) throw new Error('no instance with sessions and a known exit');
    const keys = (await api.sessions()).filter((s) => s.instance === (target as InstanceView).id).map((s) => s.key);
    expect(keys.length).to.be.greaterThan(0);

    const exits = [target.exit_ip];
    const pinned = [target.assigned_exit?.fingerprint];
    for (let rotation = 1; rotation <= 3; rotation++) {
      const previous = exits[exits.length - 1] as string;
      const r = await api.action(target.id, 'rotate');
      // The answer comes once the sessions have moved: read right after, none is on it.
      const sessionsNow = await Promise.all(keys.map((k) => api.session(k)));
      for (const s of sessionsNow) expect(s.instance, s.key).to.not.equal(target.id);
      expect(r.sessions).to.equal(0);
      expect(r.exit_ip, 'exit_ip empties during the rotation').to.equal('');
      expect(r.retired_exit_ip).to.equal(previous);
      const after = await pollUntil('a new exit after the rotation', () => api.instance(target.id), ROTATION_DEADLINE_MS, { until: (v) => v.exit_ip !== '' });
      expect(after.retired_exit_ip, 'retired_exit_ip is set only while exit_ip is empty').to.equal('');
      exits.push(after.exit_ip);
      pinned.push(after.assigned_exit?.fingerprint);
      // The pool pins a different exit on every rotation (PIN_EXIT_RELAY, the default): never the one it left.
      expect(after.exit_ip, `rotation ${rotation}: exits ${exits.join(' → ')}`).to.not.equal(previous);
      expect(pinned.at(-1), `rotation ${rotation}: a new exit relay`).to.be.a('string').and.not.equal(pinned.at(-2));
    }
    const events = await api.events(100);
    expect(events.some((e) => e.type === 'rotate' && e.instance === target.id)).to.equal(true);
    expect(events.some((e) => e.type === 'assignment' && (e.details as { from?: number; reason?: string }).from === target.id && (e.details as { reason?: string }).reason === 'rotate')).to.equal(true);
  });

  it('answers /health 503 when every instance is quarantined and 200 again on release', async () => {
    await settled(3);
    expect(await api.health()).to.equal(200);
    const ids = (await api.instances()).map((i) => i.id);
    await Promise.all(ids.map((id) => api.action(id, 'quarantine')));
    const [health, pool] = await Promise.all([api.health(), api.pool()]);
    expect(pool.routable).to.equal(0);
    expect(health).to.equal(503);
    await Promise.all(ids.map((id) => api.action(id, 'release')));
    await pollUntil('/health 200 after release', () => api.health(), ROTATION_DEADLINE_MS, { until: (s) => s === 200 });
    await settled(3);
  });

  it('resizes up and down: 202 at once, rotate before bootstrap is 409, shrinking moves sessions, indexes are reused', async () => {
    await settled(3);
    for (const body of [{ size: 0 }, { size: 65 }, { size: 'x' }, { size: 1.5 }, {}, 'nope']) {
      const r = await api.raw('/api/pool/resize', { method: 'POST', body });
      expect(r.status, JSON.stringify(body)).to.equal(400);
      await r.text();
    }
    expect((await api.pool()).size).to.equal(3);

    // It answers without waiting for the bootstrap: the new instance still refuses a rotation (409) below.
    const up = await api.resize(4);
    expect(up).to.deep.equal({ size: 4, previous: 3, adding: [3], removing: [] });
    const early = await api.raw('/api/instances/3/rotate', { method: 'POST' });
    expect(early.status, 'rotate before bootstrap').to.equal(409);
    await early.text();
    expect((await api.instances()).map((i) => i.id)).to.deep.equal([0, 1, 2, 3]);
    await pollUntil('instance 3 bootstrapped', () => api.pool(), BOOTSTRAP_DEADLINE_MS, { until: (p) => p.ready === 4 && p.routable === 4 });

    // New keys go to the emptiest instances, so 3 (and 2) end up with sessions.
    const placed = [];
    for (let i = 0; i < 8; i++) placed.push(await placeSession('resize'));
    const leaving = placed.filter((p) => p.instance >= 2);
    expect(leaving.some((p) => p.instance === 3)).to.equal(true);

    const down = await api.resize(2);
    expect(down).to.deep.equal({ size: 2, previous: 4, adding: [], removing: [2, 3] });
    for (const p of leaving) expect([0, 1], p.key).to.include((await api.session(p.key)).instance);
    const resizeDown = (await api.events(1000)).find((e) => e.type === 'resize' && e.details.to === 2) as AuditEvent;
    const retiredMoves = (await api.events(1000)).filter((e) => e.id > resizeDown.id && e.type === 'assignment' && e.details.reason === 'retired');
    const movedKeys = new Set(retiredMoves.map((e) => e.session));
    expect(retiredMoves.length, 'each leaving session moves once').to.equal(movedKeys.size);
    for (const p of leaving) expect(movedKeys.has(p.key), p.key).to.equal(true);
    for (const e of retiredMoves) expect([0, 1], 'never onto an instance that is leaving too').to.include(e.details.to);
    await pollUntil('instances 2 and 3 removed', () => api.instances(), 30_000, { until: (list) => list.map((i) => i.id).join() === '0,1' });
    const small = await api.pool();
    expect(small.size).to.equal(2);
    expect(small.config.pool_size).to.equal(2);
    // A moved session still gets through.
    await exitIpOf(suite.svc, (leaving[0] as { key: string }).key);

    const regrow = await api.resize(3);
    expect(regrow.adding, 'the lowest free index is reused').to.deep.equal([2]);
    await pollUntil('instance 2 back', () => api.pool(), BOOTSTRAP_DEADLINE_MS, { until: (p) => p.size === 3 && p.ready === 3 });
    const resizes = (await api.events(200)).filter((e) => e.type === 'resize');
    expect(resizes.length).to.be.at.least(3);
  });

  it('sweeps a pool rotate once: a second call during the sweep starts nothing', async () => {
    await settled(3);
    const first = await api.rotatePool();
    const second = await api.rotatePool();
    expect(first).to.deep.equal({ rotating: 3, in_progress: true });
    expect(second).to.deep.equal({ rotating: 0, in_progress: true });
    // Each instance is rotated in turn (its audit event carries by: sweep).
    const swept = await pollUntil(
      'every instance rotated by the sweep',
      () => api.events(200),
      3 * ROTATION_DEADLINE_MS,
      { until: (events) => new Set(events.filter((e) => e.type === 'rotate' && (e.details as { by?: string }).by === 'sweep').map((e) => e.instance)).size === 3, intervalMs: 500 },
    );
    const starts = swept.filter((e) => e.type === 'rotate' && /^pool rotate/.test(e.message));
    expect(starts, 'one sweep only').to.have.length(1);
  });
});
