import { EventEmitter } from 'node:events';
import type { AuditEvent, AuditType } from '../../shared/api/audit-event.js';

/** Size of the audit ring; also the maximum of GET /api/events?limit=. */
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
 * A bounded ring of audit events, newest first on read. Emits 'event' for each record so
 * the live stream can forward it. Refused proxy credentials and failed sign-ins are never
 * recorded (they are logged instead), so hostile traffic cannot flush the ring.
 */
export class AuditLog extends EventEmitter {
  private readonly ring: (AuditEvent | undefined)[];
  private next = 0;
  private count = 0;
  private seq = 0;

  constructor(private readonly capacity = AUDIT_CAPACITY) {
    super();
    this.ring = new Array<AuditEvent | undefined>(capacity);
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
    this.ring[this.next] = event;
    this.next = (this.next + 1) % this.capacity;
    this.count = Math.min(this.count + 1, this.capacity);
    this.emit('event', event);
    return event;
  }

  /** Newest first. */
  recent(limit = AUDIT_DEFAULT_LIMIT): AuditEvent[] {
    const n = Math.min(limit, this.count);
    const out: AuditEvent[] = [];
    for (let i = 1; i <= n; i++) {
      out.push(this.ring[(this.next - i + this.capacity) % this.capacity] as AuditEvent);
    }
    return out;
  }

  get size(): number {
    return this.count;
  }
}
