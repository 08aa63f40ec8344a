import type { StatsSample } from '../../shared/api/views.js';
import { LatencyHistogram } from './latency-histogram.js';

export type { StatsSample };

/** Fine series: one sample per FINE_INTERVAL_MS, FINE_SAMPLES of them (15 minutes). */
export const FINE_INTERVAL_MS = 1000;
export const FINE_SAMPLES = 900;
/** Long series: one sample per LONG_INTERVAL_MS, LONG_SAMPLES of them (24 hours). */
export const LONG_INTERVAL_MS = 60_000;
export const LONG_SAMPLES = 1440;

class Interval {
  requests = 0;
  failures = 0;
  bytesUp = 0;
  bytesDown = 0;
  readonly latency = new LatencyHistogram();

  reset(): void {
    this.requests = 0;
    this.failures = 0;
    this.bytesUp = 0;
    this.bytesDown = 0;
    this.latency.reset();
  }

  add(o: Interval): void {
    this.requests += o.requests;
    this.failures += o.failures;
    this.bytesUp += o.bytesUp;
    this.bytesDown += o.bytesDown;
    this.latency.merge(o.latency);
  }

  sample(time: number, intervalMs: number, sessions: number, routable: number): StatsSample {
    return {
      time: new Date(time).toISOString(),
      interval_secs: intervalMs / 1000,
      requests: this.requests,
      failures: this.failures,
      bytes_up: this.bytesUp,
      bytes_down: this.bytesDown,
      latency_ms: { p50: this.latency.quantile(0.5), p90: this.latency.quantile(0.9), p99: this.latency.quantile(0.99) },
      sessions,
      routable,
    };
  }
}

class SampleRing {
  private readonly items: StatsSample[] = [];
  constructor(private readonly capacity: number) {}
  push(s: StatsSample): void {
    this.items.push(s);
    if (this.items.length > this.capacity) this.items.shift();
  }
  all(): StatsSample[] {
    return [...this.items];
  }
  last(): StatsSample | null {
    return this.items[this.items.length - 1] ?? null;
  }
}

/**
 * Request statistics over time with bounded memory. record() is O(1); the ticker closes an
 * interval every second (and folds 60 of them into a long-range sample).
 */
export class StatsHistory {
  private readonly current = new Interval();
  private readonly minute = new Interval();
  private secondsInMinute = 0;
  private readonly fine = new SampleRing(FINE_SAMPLES);
  private readonly long = new SampleRing(LONG_SAMPLES);

  record(r: { ok: boolean; bytesUp: number; bytesDown: number; latencyMs: number | null }): void {
    const c = this.current;
    c.requests += 1;
    if (!r.ok) c.failures += 1;
    c.bytesUp += r.bytesUp;
    c.bytesDown += r.bytesDown;
    if (r.latencyMs !== null) c.latency.record(r.latencyMs);
  }

  /** Closes the current fine interval; call every FINE_INTERVAL_MS. */
  tick(now: number, gauges: { sessions: number; routable: number }): StatsSample {
    const sample = this.current.sample(now, FINE_INTERVAL_MS, gauges.sessions, gauges.routable);
    this.fine.push(sample);
    this.minute.add(this.current);
    this.current.reset();
    this.secondsInMinute += 1;
    if (this.secondsInMinute * FINE_INTERVAL_MS >= LONG_INTERVAL_MS) {
      this.long.push(this.minute.sample(now, LONG_INTERVAL_MS, gauges.sessions, gauges.routable));
      this.minute.reset();
      this.secondsInMinute = 0;
    }
    return sample;
  }

  /** Puts back the series the durable state kept (oldest first), before the first tick. */
  restore(fine: readonly StatsSample[], long: readonly StatsSample[]): void {
    for (const sample of fine.slice(-FINE_SAMPLES)) this.fine.push(sample);
    for (const sample of long.slice(-LONG_SAMPLES)) this.long.push(sample);
  }

  series(range: 'fine' | 'long'): StatsSample[] {
    return range === 'long' ? this.long.all() : this.fine.all();
  }

  latest(): StatsSample | null {
    return this.fine.last();
  }
}
