interface Cell<T> {
  readonly value: T;
  readonly next: Cell<T> | null;
}

/**
 * An immutable FIFO queue (two singly linked lists, the back one reversed on demand), so the
 * health machine can stay a pure reducer while its failure window still adds and expires in
 * O(1) amortised time. Every operation returns a new queue; old versions stay valid.
 */
export class PersistentQueue<T> {
  private static readonly EMPTY = new PersistentQueue<never>(null, null, 0);

  private constructor(
    private readonly front: Cell<T> | null,
    private readonly back: Cell<T> | null,
    readonly size: number,
  ) {}

  static empty<T>(): PersistentQueue<T> {
    return PersistentQueue.EMPTY as PersistentQueue<T>;
  }

  get isEmpty(): boolean {
    return this.size === 0;
  }

  push(value: T): PersistentQueue<T> {
    // Keep the invariant "front is empty only when the queue is", so peek is O(1).
    if (this.front === null) return new PersistentQueue({ value, next: null }, null, 1);
    return new PersistentQueue(this.front, { value, next: this.back }, this.size + 1);
  }

  peek(): T | undefined {
    return this.front?.value;
  }

  /** The queue without its oldest element (itself when empty). */
  pop(): PersistentQueue<T> {
    if (this.front === null) return this;
    if (this.size === 1) return PersistentQueue.empty();
    const rest = this.front.next;
    if (rest !== null) return new PersistentQueue(rest, this.back, this.size - 1);
    let reversed: Cell<T> | null = null;
    for (let c = this.back; c !== null; c = c.next) reversed = { value: c.value, next: reversed };
    return new PersistentQueue(reversed, null, this.size - 1);
  }

  /** Oldest first. */
  *[Symbol.iterator](): IterableIterator<T> {
    for (let c = this.front; c !== null; c = c.next) yield c.value;
    const tail: T[] = [];
    for (let c = this.back; c !== null; c = c.next) tail.push(c.value);
    for (let i = tail.length - 1; i >= 0; i--) yield tail[i] as T;
  }
}
