import { EventEmitter } from 'node:events';
import type { AuditEvent, AuditType } from '../../shared/api/audit-event.js';

/** Size of each class's ring; also the maximum of GET /api/events?limit=. */
export const AUDIT_CAPACITY = 1000;
/** GET /api/events without a limit returns this many. */
export const AUDIT_DEFAULT_LIMIT = 100;

export interface AuditInput {
  type: AuditType;
  message: string;
  instance?: number | null;
  session?: string | null;
  details?: Record<string, unknown>;
}

/**
 * `session`: what any proxy token can cause in volume (a session assigned or moved, rotated, a
 * failure reported about it). `operator`: security and operator events (sign-ins and tokens,
 * quarantine, remediation, restarts, resizes, instance actions).
 */
export type AuditClass = 'session' | 'operator';

export function auditClassOf(type: AuditType, session: string | null): AuditClass {
  if (type === 'assignment' || type === 'rotate') return 'session';
  // A failure report, or an exit assigned for a session's rotation: what a proxy token can cause.
  if ((type === 'instance' || type === 'exit') && session !== null) return 'session';
  return 'operator';
}

/** One fixed-size ring, oldest overwritten. */
class Ring {
  private readonly slots: (AuditEvent | undefined)[];
  private next = 0;
  size = 0;

  constructor(private readonly capacity: number) {
    this.slots = new Array<AuditEvent | undefined>(capacity);
  }

  push(event: AuditEvent): void {
    this.slots[this.next] = event;
    this.next = (this.next + 1) % this.capacity;
    this.size = Math.min(this.size + 1, this.capacity);
  }

  /** The i-th newest (0-based), i < size. */
  newest(i: number): AuditEvent {
    return this.slots[(this.next - 1 - i + 2 * this.capacity) % this.capacity] as AuditEvent;
  }
}

/**
 * The audit trail: a bounded ring per class (auditClassOf), read as one list newest first.
 * Separate capacity means a proxy token can churn the session ring as fast as it likes (1,000
 * rotates take about a second) without evicting one auth, quarantine or restart event. Emits
 * 'event' for each record so the live stream can forward it. Refused proxy credentials and
 * failed sign-ins are never recorded (they are logged at a bounded rate instead).
 */
export class AuditLog extends EventEmitter {
  private readonly rings: Record<AuditClass, Ring>;
  private seq = 0;

  /** `capacity`: events kept per class. */
  constructor(capacity = AUDIT_CAPACITY) {
    super();
    this.rings = { session: new Ring(capacity), operator: new Ring(capacity) };
  }

  record(input: AuditInput, now = Date.now()): AuditEvent {
    const event: AuditEvent = {
      id: ++this.seq,
      time: new Date(now).toISOString(),
      type: input.type,
      instance: input.instance ?? null,
      session: input.session ?? null,
      message: input.message,
      details: input.details ?? {},
    };
    this.rings[auditClassOf(event.type, event.session)].push(event);
    this.emit('event', event);
    return event;
  }

  /**
   * Puts back events the durable state kept (any order), before anything is recorded: each
   * class keeps its newest, and ids go on from the highest, so they stay unique across restarts.
   */
  restore(events: readonly AuditEvent[]): void {
    for (const e of [...events].sort((a, b) => a.id - b.id)) {
      if (e.id <= this.seq) continue;
      this.rings[auditClassOf(e.type, e.session)].push(e);
      this.seq = e.id;
    }
  }

  /** Newest first, both classes merged by id; only `types` when given. */
  recent(limit = AUDIT_DEFAULT_LIMIT, types?: readonly AuditType[]): AuditEvent[] {
    const { session, operator } = this.rings;
    const wanted = types === undefined ? null : new Set(types);
    const out: AuditEvent[] = [];
    let i = 0;
    let j = 0;
    while (out.length < limit && (i < session.size || j < operator.size)) {
      const a = i < session.size ? session.newest(i) : undefined;
      const b = j < operator.size ? operator.newest(j) : undefined;
      let next: AuditEvent;
      if (b === undefined || (a !== undefined && a.id > b.id)) {
        next = a as AuditEvent;
        i++;
      } else {
        next = b;
        j++;
      }
      if (wanted === null || wanted.has(next.type)) out.push(next);
    }
    return out;
  }

  get size(): number {
    return this.rings.session.size + this.rings.operator.size;
  }
}
