import type { StatsSample } from '../../../shared/api/views.js';

/** How many recent stream samples the dashboard keeps (one a second: two minutes). */
export const RECENT_SAMPLES = 120;

/**
 * Adds the sample a stream snapshot carried. Snapshots arrive about every second but the
 * sample in them changes only when an interval closes, so the same sample is seen twice at
 * times: it is kept once (by its time). Older-than-newest samples are ignored.
 */
export function appendSample(samples: readonly StatsSample[], sample: StatsSample | null, max = RECENT_SAMPLES): readonly StatsSample[] {
  if (sample === null) return samples;
  const last = samples[samples.length - 1];
  if (last !== undefined && Date.parse(sample.time) <= Date.parse(last.time)) return samples;
  const next = [...samples, sample];
  return next.length > max ? next.slice(next.length - max) : next;
}

export interface Rates {
  requests: number;
  failures: number;
  bytesUp: number;
  bytesDown: number;
  /** Seconds the rates cover (0 when no sample was there). */
  coveredSecs: number;
}

/**
 * Per-second rates over the samples ending in the newest one and covering at most
 * `windowSecs`. Averaging a few seconds keeps the numbers readable while traffic is bursty.
 */
export function ratesOver(samples: readonly StatsSample[], windowSecs = 10): Rates {
  const rates: Rates = { requests: 0, failures: 0, bytesUp: 0, bytesDown: 0, coveredSecs: 0 };
  const newest = samples[samples.length - 1];
  if (newest === undefined) return rates;
  const end = Date.parse(newest.time);
  for (let i = samples.length - 1; i >= 0; i--) {
    const s = samples[i] as StatsSample;
    if (end - Date.parse(s.time) >= windowSecs * 1000) break;
    rates.requests += s.requests;
    rates.failures += s.failures;
    rates.bytesUp += s.bytes_up;
    rates.bytesDown += s.bytes_down;
    rates.coveredSecs += s.interval_secs;
  }
  if (rates.coveredSecs > 0) {
    rates.requests /= rates.coveredSecs;
    rates.failures /= rates.coveredSecs;
    rates.bytesUp /= rates.coveredSecs;
    rates.bytesDown /= rates.coveredSecs;
  }
  return rates;
}
