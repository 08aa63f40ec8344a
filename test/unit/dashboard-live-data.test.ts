import { expect } from 'chai';
import fc from 'fast-check';
import '../support/fixtures/fuzz-runs.js';
import type { AuditEvent } from '../../shared/api/audit-event.js';
import type { InstanceView, StatsSample } from '../../shared/api/views.js';
import { MAX_KEPT_EVENTS, filterEvents, mergeEvents } from '../../dashboard/src/logic/audit-log.js';
import { HEALTH_STATES, countByState, formatFailureKinds, pressureLevel, quarantineFraction } from '../../dashboard/src/logic/health.js';
import { INITIAL_LIVE_DATA, liveReducer } from '../../dashboard/src/logic/live-data.js';
import { appendSample, ratesOver } from '../../dashboard/src/logic/rates.js';
import type { StreamSnapshot } from '../../dashboard/src/logic/snapshot.js';

function sample(second: number, over: Partial<StatsSample> = {}): StatsSample {
  return {
    time: new Date(Date.UTC(2026, 0, 1, 0, 0, second)).toISOString(),
    interval_secs: 1,
    requests: 0,
    failures: 0,
    bytes_up: 0,
    bytes_down: 0,
    latency_ms: { p50: 0, p90: 0, p99: 0 },
    sessions: 0,
    routable: 1,
    ...over,
  };
}

function event(id: number, over: Partial<AuditEvent> = {}): AuditEvent {
  return { id, time: new Date(1_700_000_000_000 + id * 1000).toISOString(), type: 'rotate', instance: null, session: null, message: `event ${id}`, details: {}, ...over };
}

function instance(id: number, over: Partial<InstanceView> = {}): InstanceView {
  return {
    id,
    ready: true,
    running: true,
    bootstrap: 100,
    pid: 100 + id,
    uptime_secs: 10,
    sessions: 0,
    socks_addr: `127.0.0.1:${9000 + id}`,
    exit_ip: `127.0.0.${11 + id}`,
    exit_country: '',
    exit_nickname: 'exit',
    retired_exit_ip: '',
    exit_confirmed: false,
    published_exit_ip: `127.0.0.${11 + id}`,
    exit_ip_source: 'published',
    exit_ip_measured_at: null,
    pinned_exit: '',
    draining: false,
    spare: false,
    rotating: false,
    responsive: true,
    assigned_exit: null,
    exit_shortage: '',
    health: {
      state: 'healthy',
      failures_in_window: 0,
      consecutive_failures: 0,
      failure_score: 0,
      quarantine_score: 5,
      transport_failures: 0,
      client_failures: 0,
      failures_by_kind: {},
      remediations: 0,
      remediation_rung: '',
    },
    totals: { requests: 0, failures: 0, bytes_up: 0, bytes_down: 0, latency_ms: 0 },
    ...over,
  };
}

function snapshot(instances: InstanceView[], stats: StatsSample | null): StreamSnapshot {
  return {
    pool: {
      version: '0.1.0', size: instances.length, ready: instances.length, routable: instances.length, sessions: 0,
      spares: { size: 0, ready: 0, warm: 0, in_use: 0 },
      totals: { requests: 0, failures: 0, bytes_up: 0, bytes_down: 0 }, socks_port: 9250, http_port: 9251,
      config: { pool_size: instances.length, session_ttl: '10m0s', default_session: 'ip' },
    },
    instances,
    stats,
  };
}

describe('dashboard live data', () => {
  describe('stream samples and rates', () => {
    it('keeps each sample once, in order, bounded', () => {
      let s: readonly StatsSample[] = [];
      s = appendSample(s, sample(1));
      s = appendSample(s, sample(1)); // the same sample in the next snapshot
      s = appendSample(s, sample(0)); // older: ignored
      s = appendSample(s, null);
      s = appendSample(s, sample(2));
      expect(s.map((x) => x.time.slice(17, 19))).to.deep.equal(['01', '02']);
      let many: readonly StatsSample[] = [];
      for (let i = 0; i < 50; i++) many = appendSample(many, sample(i), 10);
      expect(many).to.have.length(10);
      expect(many[0]!.time).to.equal(sample(40).time);
    });

    it('averages per-second rates over the window ending at the newest sample', () => {
      const s = [sample(1, { requests: 100 }), sample(2, { requests: 10, failures: 2, bytes_up: 1000, bytes_down: 4000 }), sample(3, { requests: 20, bytes_down: 2000 })];
      const r = ratesOver(s, 2);
      expect(r).to.deep.equal({ requests: 15, failures: 1, bytesUp: 500, bytesDown: 3000, coveredSecs: 2 });
      expect(ratesOver([], 10)).to.deep.equal({ requests: 0, failures: 0, bytesUp: 0, bytesDown: 0, coveredSecs: 0 });
    });

    it('reads long samples per second of their interval', () => {
      const r = ratesOver([sample(0, { interval_secs: 60, requests: 120 })], 600);
      expect(r.requests).to.equal(2);
    });
  });

  describe('audit events', () => {
    it('merges fetched and live events newest first without duplicates (property)', () => {
      fc.assert(
        fc.property(fc.array(fc.integer({ min: 1, max: 200 })), fc.array(fc.integer({ min: 1, max: 200 })), (a, b) => {
          const merged = mergeEvents(mergeEvents([], a.map((id) => event(id))), b.map((id) => event(id)), 50);
          const ids = merged.map((e) => e.id);
          const expected = [...new Set([...a, ...b])].sort((x, y) => y - x).slice(0, 50);
          expect(ids).to.deep.equal(expected);
        }),
      );
    });

    it('keeps at most MAX_KEPT_EVENTS', () => {
      const many = Array.from({ length: MAX_KEPT_EVENTS + 5 }, (_, i) => event(i + 1));
      const merged = mergeEvents([], many);
      expect(merged).to.have.length(MAX_KEPT_EVENTS);
      expect(merged[0]!.id).to.equal(MAX_KEPT_EVENTS + 5);
    });

    it('filters by type and by text in message, session or instance', () => {
      const events = [
        event(1, { type: 'auth', message: 'token abc (proxy) issued' }),
        event(2, { type: 'rotate', instance: 3, message: 'instance 3 rotating to a new circuit' }),
        event(3, { type: 'assignment', session: 'Alice', instance: 1, message: 'session assigned' }),
      ];
      expect(filterEvents(events, new Set(), '').map((e) => e.id)).to.deep.equal([1, 2, 3]);
      expect(filterEvents(events, new Set(['auth']), '').map((e) => e.id)).to.deep.equal([1]);
      expect(filterEvents(events, new Set(['auth', 'rotate']), 'circuit').map((e) => e.id)).to.deep.equal([2]);
      expect(filterEvents(events, new Set(), 'alice').map((e) => e.id)).to.deep.equal([3]);
      expect(filterEvents(events, new Set(), '#1').map((e) => e.id)).to.deep.equal([3]);
    });
  });

  describe('health', () => {
    it('counts instances per state', () => {
      const counts = countByState([
        instance(0),
        instance(1, { health: { ...instance(1).health, state: 'quarantined' } }),
        instance(2, { health: { ...instance(2).health, state: 'quarantined' } }),
      ]);
      expect(counts).to.deep.equal({ starting: 0, healthy: 1, degraded: 0, probation: 0, quarantined: 2, remediating: 0 });
      expect(HEALTH_STATES).to.have.length(6);
    });

    it('reads failure_score against quarantine_score as a clamped fraction', () => {
      expect(quarantineFraction({ failure_score: 2.5, quarantine_score: 5 })).to.equal(0.5);
      expect(quarantineFraction({ failure_score: 9, quarantine_score: 5 })).to.equal(1);
      expect(quarantineFraction({ failure_score: 1, quarantine_score: 0 })).to.equal(0);
      expect([0, 0.5, 0.79, 0.8, 1].map(pressureLevel)).to.deep.equal(['low', 'medium', 'medium', 'high', 'high']);
      expect(formatFailureKinds({ blocked: 1, captcha: 2, other: 0, transport: 1 })).to.equal('captcha 2, blocked 1, transport 1');
    });
  });

  describe('reducer', () => {
    it('folds snapshots, events, status and an action result', () => {
      let d = liveReducer(INITIAL_LIVE_DATA, { type: 'snapshot', snapshot: snapshot([instance(0), instance(1)], sample(1, { requests: 4 })) });
      d = liveReducer(d, { type: 'snapshot', snapshot: snapshot([instance(0), instance(1)], sample(2, { requests: 6 })) });
      expect(d.samples).to.have.length(2);
      d = liveReducer(d, { type: 'event', event: event(7) });
      d = liveReducer(d, { type: 'events', events: [event(5), event(7), event(6)] });
      expect(d.events.map((e) => e.id)).to.deep.equal([7, 6, 5]);
      d = liveReducer(d, { type: 'status', status: { kind: 'live' } });
      expect(d.status.kind).to.equal('live');
      const rotated = instance(1, { exit_ip: '', retired_exit_ip: '127.0.0.12' });
      d = liveReducer(d, { type: 'instance', instance: rotated });
      expect(d.snapshot!.instances[1]).to.equal(rotated);
      expect(d.snapshot!.instances[0]!.exit_ip).to.equal('127.0.0.11');
      // An instance the snapshot does not hold (already removed by a shrink) is ignored.
      const unchanged = liveReducer(d, { type: 'instance', instance: instance(9) });
      expect(unchanged.snapshot).to.equal(d.snapshot);
    });

    it('ignores an action result before the first snapshot', () => {
      expect(liveReducer(INITIAL_LIVE_DATA, { type: 'instance', instance: instance(0) })).to.equal(INITIAL_LIVE_DATA);
    });
  });
});
