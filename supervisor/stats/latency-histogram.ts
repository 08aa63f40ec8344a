/**
 * A fixed log-scale latency histogram: recording is O(1) (one index computation, one
 * increment) and percentiles are read from bucket counts, so the hot path never sorts
 * raw samples. Buckets grow by LATENCY_BUCKET_GROWTH from 0.1 ms; relative error ≤ ~10 %.
 */
export const LATENCY_BUCKET_GROWTH = 1.2;
const FIRST_BUCKET_MS = 0.1;
export const LATENCY_BUCKETS = 80; // 0.1 ms · 1.2^79 ≈ 180 s; slower lands in the last bucket

const LOG_GROWTH = Math.log(LATENCY_BUCKET_GROWTH);

export function bucketOf(ms: number): number {
  if (!(ms > FIRST_BUCKET_MS)) return 0;
  const b = Math.ceil(Math.log(ms / FIRST_BUCKET_MS) / LOG_GROWTH);
  return b >= LATENCY_BUCKETS ? LATENCY_BUCKETS - 1 : b;
}

/** Upper bound of a bucket, the value reported for a percentile that falls in it. */
export function bucketUpperMs(b: number): number {
  return FIRST_BUCKET_MS * LATENCY_BUCKET_GROWTH ** b;
}

export class LatencyHistogram {
  readonly counts = new Uint32Array(LATENCY_BUCKETS);
  total = 0;

  record(ms: number): void {
    const b = bucketOf(ms);
    this.counts[b] = (this.counts[b] ?? 0) + 1;
    this.total += 1;
  }

  merge(other: LatencyHistogram): void {
    for (let i = 0; i < LATENCY_BUCKETS; i++) this.counts[i] = (this.counts[i] ?? 0) + (other.counts[i] ?? 0);
    this.total += other.total;
  }

  reset(): void {
    this.counts.fill(0);
    this.total = 0;
  }

  /** The q-quantile (0..1) in ms, rounded to 0.1 ms; 0 when empty. */
  quantile(q: number): number {
    if (this.total === 0) return 0;
    const rank = Math.max(1, Math.ceil(q * this.total));
    let seen = 0;
    for (let i = 0; i < LATENCY_BUCKETS; i++) {
      seen += this.counts[i] as number;
      if (seen >= rank) return Math.round(bucketUpperMs(i) * 10) / 10;
    }
    return Math.round(bucketUpperMs(LATENCY_BUCKETS - 1) * 10) / 10;
  }
}
