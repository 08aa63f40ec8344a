import type { FailureKind } from '../../shared/health/failure-kind.js';
import { PersistentQueue } from './persistent-queue.js';
import type { ScoringRules } from './weights.js';

interface WindowEntry {
  readonly at: number;
  readonly kind: FailureKind;
  readonly weight: number;
  /** The site a client's complaint named (its ban settles the entry); undefined for everything else. */
  readonly site?: string;
  /** Order of arrival, so a success can mark where the current run of failures begins. */
  readonly seq: number;
}

/**
 * Scored failures of one instance within FAILURE_WINDOW, as an immutable value (each operation
 * returns a new window) with O(1) amortised add and expiry.
 *
 * consecutive counts the exit-blaming failures (every kind but rate_limited) since the last
 * success, and only those still inside the window: a run interrupted by a quiet spell longer
 * than the window starts again from zero. Without that, an instance whose window emptied
 * (healthy again) could be quarantined by one report, which must not happen (one report never quarantines a healthy instance unless QUARANTINE_FAILURES is 1). A success
 * resets consecutive but leaves the window as it is.
 */
export class FailureWindow {
  private constructor(
    readonly windowMs: number,
    readonly rules: ScoringRules,
    private readonly entries: PersistentQueue<WindowEntry>,
    private readonly blamingWeight: number,
    private readonly rateLimitedWeight: number,
    /** Exit-blaming entries in the window with seq greater than runStartSeq. */
    readonly consecutive: number,
    private readonly runStartSeq: number,
    private readonly nextSeq: number,
    /**
     * When the latest exit-blaming failure happened (its own time, which for a connection is
     * when it ended). A success that ended before it is older news and resets nothing.
     */
    private readonly lastBlamingAt: number,
  ) {}

  static empty(windowMs: number, rules: ScoringRules): FailureWindow {
    if (!(windowMs > 0)) throw new RangeError(`FAILURE_WINDOW must be positive, got ${windowMs}`);
    return new FailureWindow(windowMs, rules, PersistentQueue.empty(), 0, 0, 0, 0, 1, Number.NEGATIVE_INFINITY);
  }

  /** failures_in_window */
  get size(): number {
    return this.entries.size;
  }

  get isEmpty(): boolean {
    return this.entries.isEmpty;
  }

  /** failure_score: exit-blaming weights plus the rate limits' weights up to their cap. */
  get score(): number {
    return this.blamingWeight + Math.min(this.rateLimitedWeight, this.rules.rateLimitedCap);
  }

  /** Time of the oldest report still inside, or null; it leaves the window at oldestAt + windowMs. */
  get oldestAt(): number | null {
    return this.entries.peek()?.at ?? null;
  }

  /** `occurredAt`: when the failure happened, if earlier than `at` (when it was learnt). */
  add(at: number, kind: FailureKind, occurredAt: number = at, site?: string): FailureWindow {
    const weight = this.rules.weights[kind];
    const entry: WindowEntry = { at, kind, weight, seq: this.nextSeq, ...(site === undefined ? {} : { site }) };
    const blames = kind !== 'rate_limited';
    return new FailureWindow(
      this.windowMs,
      this.rules,
      this.entries.push(entry),
      this.blamingWeight + (blames ? weight : 0),
      this.rateLimitedWeight + (blames ? 0 : weight),
      this.consecutive + (blames ? 1 : 0),
      this.runStartSeq,
      this.nextSeq + 1,
      blames ? Math.max(this.lastBlamingAt, occurredAt) : this.lastBlamingAt,
    );
  }

  /**
   * A success that ended at `endedAt` ends the run of failures, unless it ended no later than
   * the latest of them: proxy workers report finished connections in batches, so the success
   * of a request a client has already reported as blocked can arrive after the report.
   */
  success(endedAt: number = Number.POSITIVE_INFINITY): FailureWindow {
    // With no exit-blaming failure after the run start, moving the start changes nothing.
    if (this.consecutive === 0) return this;
    if (endedAt <= this.lastBlamingAt) return this;
    return new FailureWindow(this.windowMs, this.rules, this.entries, this.blamingWeight, this.rateLimitedWeight, 0, this.nextSeq - 1, this.nextSeq, this.lastBlamingAt);
  }

  /** Drops every report older than the window: one that arrived at `at` is gone from at + windowMs on. */
  expire(now: number): FailureWindow {
    let entries = this.entries;
    let blaming = this.blamingWeight;
    let rateLimited = this.rateLimitedWeight;
    let consecutive = this.consecutive;
    const cutoff = now - this.windowMs;
    for (let oldest = entries.peek(); oldest !== undefined && oldest.at <= cutoff; oldest = entries.peek()) {
      entries = entries.pop();
      if (oldest.kind === 'rate_limited') {
        rateLimited -= oldest.weight;
      } else {
        blaming -= oldest.weight;
        if (oldest.seq > this.runStartSeq) consecutive -= 1;
      }
    }
    if (entries === this.entries) return this;
    // Sums of multiples of 1/4 are exact; zeroing an empty window guards against any other weights.
    if (entries.isEmpty) blaming = rateLimited = 0;
    return new FailureWindow(this.windowMs, this.rules, entries, blaming, rateLimited, consecutive, this.runStartSeq, this.nextSeq, this.lastBlamingAt);
  }

  cleared(): FailureWindow {
    return FailureWindow.empty(this.windowMs, this.rules);
  }

  /**
   * Without the complaints about `site` (a ban for that site answered them): every other entry,
   * the pool's own transport evidence included, stays, with its place in the current run.
   */
  withoutSite(site: string): FailureWindow {
    const kept = [...this.entries].filter((e) => e.site !== site);
    if (kept.length === this.entries.size) return this;
    let entries = PersistentQueue.empty<WindowEntry>();
    let blaming = 0;
    let rateLimited = 0;
    let consecutive = 0;
    for (const e of kept) {
      entries = entries.push(e);
      if (e.kind === 'rate_limited') rateLimited += e.weight;
      else {
        blaming += e.weight;
        if (e.seq > this.runStartSeq) consecutive += 1;
      }
    }
    return new FailureWindow(this.windowMs, this.rules, entries, blaming, rateLimited, consecutive, this.runStartSeq, this.nextSeq, this.lastBlamingAt);
  }

  /** Oldest first, with whether each is part of the current run (the durable state writes them). */
  entriesWithRun(): { at: number; kind: FailureKind; inRun: boolean }[] {
    return [...this.entries].map((e) => ({ at: e.at, kind: e.kind, inRun: e.seq > this.runStartSeq }));
  }

  /** Oldest first, for tests and diagnostics. */
  kinds(): FailureKind[] {
    return [...this.entries].map((e) => e.kind);
  }
}
