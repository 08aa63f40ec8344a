import type { FailureKind, FailureSource } from '../../shared/health/failure-kind.js';

/**
 * Counts of failures by source and by kind, as an immutable value. The health object shows one
 * tally that release clears (the "accumulated failures" a release clears); the metrics read another that
 * only grows (Prometheus counters must never go down).
 */
export class FailureTally {
  private static readonly EMPTY = new FailureTally(0, 0, {});

  private constructor(
    readonly transport: number,
    readonly client: number,
    private readonly kinds: Readonly<Partial<Record<FailureKind, number>>>,
  ) {}

  static empty(): FailureTally {
    return FailureTally.EMPTY;
  }

  /** A tally read back from the durable state. */
  static of(transport: number, client: number, kinds: Readonly<Partial<Record<FailureKind, number>>>): FailureTally {
    return new FailureTally(transport, client, { ...kinds });
  }

  add(source: FailureSource, kind: FailureKind): FailureTally {
    return new FailureTally(
      this.transport + (source === 'transport' ? 1 : 0),
      this.client + (source === 'client' ? 1 : 0),
      { ...this.kinds, [kind]: (this.kinds[kind] ?? 0) + 1 },
    );
  }

  get total(): number {
    return this.transport + this.client;
  }

  /** failures_by_kind: only kinds actually seen appear. A fresh object each call. */
  byKind(): Record<string, number> {
    return { ...this.kinds };
  }
}
