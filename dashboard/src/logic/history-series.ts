import type { StatsSample } from '../../../shared/api/views.js';

/**
 * Columns for the timeline charts (uPlot takes one x array and one array per series).
 * Counts become per-second rates, so fine (1 s) and long (60 s) series read on the same scale.
 */
export interface HistoryColumns {
  /** Unix seconds. */
  time: number[];
  requests: number[];
  failures: number[];
  bytesUp: number[];
  bytesDown: number[];
  p50: number[];
  p99: number[];
  routable: number[];
  sessions: number[];
}

export function historyColumns(samples: readonly StatsSample[]): HistoryColumns {
  const cols: HistoryColumns = { time: [], requests: [], failures: [], bytesUp: [], bytesDown: [], p50: [], p99: [], routable: [], sessions: [] };
  const sorted = [...samples].sort((a, b) => Date.parse(a.time) - Date.parse(b.time));
  let lastTime = -Infinity;
  for (const s of sorted) {
    const t = Date.parse(s.time) / 1000;
    if (!Number.isFinite(t) || t <= lastTime) continue;
    lastTime = t;
    const per = s.interval_secs > 0 ? s.interval_secs : 1;
    cols.time.push(t);
    cols.requests.push(s.requests / per);
    cols.failures.push(s.failures / per);
    cols.bytesUp.push(s.bytes_up / per);
    cols.bytesDown.push(s.bytes_down / per);
    cols.p50.push(s.latency_ms.p50);
    cols.p99.push(s.latency_ms.p99);
    cols.routable.push(s.routable);
    cols.sessions.push(s.sessions);
  }
  return cols;
}

/**
 * Appends a live sample to a fine series fetched earlier (the stream carries the newest
 * sample each second), keeping at most `max` points.
 */
export function extendHistory(samples: readonly StatsSample[], sample: StatsSample | null, max: number): readonly StatsSample[] {
  if (sample === null) return samples;
  const last = samples[samples.length - 1];
  if (last !== undefined && Date.parse(sample.time) <= Date.parse(last.time)) return samples;
  const next = [...samples, sample];
  return next.length > max ? next.slice(next.length - max) : next;
}
