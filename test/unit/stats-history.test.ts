import { expect } from 'chai';
import fc from 'fast-check';
import '../support/fixtures/fuzz-runs.js';
import { LatencyHistogram, bucketOf, bucketUpperMs } from '../../supervisor/stats/latency-histogram.js';
import { FINE_SAMPLES, LONG_INTERVAL_MS, StatsHistory } from '../../supervisor/stats/stats-history.js';

describe('statistics history', () => {
  it('closes one fine sample per tick with exact counters', () => {
    const h = new StatsHistory();
    h.record({ ok: true, bytesUp: 10, bytesDown: 200, latencyMs: 5 });
    h.record({ ok: false, bytesUp: 1, bytesDown: 0, latencyMs: null });
    const s = h.tick(Date.UTC(2026, 0, 1, 0, 0, 1), { sessions: 3, routable: 2 });
    expect(s).to.include({ requests: 2, failures: 1, bytes_up: 11, bytes_down: 200, sessions: 3, routable: 2, interval_secs: 1 });
    expect(s.time).to.equal('2026-01-01T00:00:01.000Z');
    expect(h.tick(Date.UTC(2026, 0, 1, 0, 0, 2), { sessions: 3, routable: 2 }).requests).to.equal(0);
    expect(h.series('fine')).to.have.length(2);
  });

  it('folds sixty seconds into one long-range sample and stays bounded', () => {
    const h = new StatsHistory();
    const start = Date.UTC(2026, 0, 1);
    for (let i = 1; i <= FINE_SAMPLES + 120; i++) {
      h.record({ ok: true, bytesUp: 1, bytesDown: 1, latencyMs: 10 });
      h.tick(start + i * 1000, { sessions: 0, routable: 1 });
    }
    expect(h.series('fine')).to.have.length(FINE_SAMPLES);
    const long = h.series('long');
    expect(long).to.have.length((FINE_SAMPLES + 120) / (LONG_INTERVAL_MS / 1000));
    expect(long[0]!.requests).to.equal(60);
    expect(long[0]!.interval_secs).to.equal(60);
  });

  it('reads percentiles from the histogram within its resolution (property)', () => {
    fc.assert(
      fc.property(fc.array(fc.double({ min: 0.2, max: 60_000, noNaN: true }), { minLength: 1, maxLength: 300 }), (values) => {
        const hist = new LatencyHistogram();
        values.forEach((v) => hist.record(v));
        const sorted = [...values].sort((a, b) => a - b);
        for (const q of [0.5, 0.9, 0.99]) {
          const exact = sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)] as number;
          const got = hist.quantile(q);
          expect(got).to.be.at.least(exact * 0.99 - 0.1);
          expect(got).to.be.at.most(bucketUpperMs(bucketOf(exact)) + 0.1);
        }
      }),
    );
  });
});
