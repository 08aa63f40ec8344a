/** Audit event types (docs/api.md, "Audit event"). */
export type AuditType = 'assignment' | 'rotate' | 'quarantine' | 'remediation' | 'restart' | 'resize' | 'instance' | 'auth' | 'exit';
export const AUDIT_TYPES: readonly AuditType[] = [
  'assignment',
  'rotate',
  'quarantine',
  'remediation',
  'restart',
  'resize',
  'instance',
  'auth',
  'exit',
];

/** One audit-log record as the API returns it (documented in docs/api.md). */
export interface AuditEvent {
  /** Monotonic sequence number; with the durable state on it goes on across restarts. */
  id: number;
  /** ISO 8601 UTC timestamp. */
  time: string;
  type: AuditType;
  /** Instance concerned, or null. */
  instance: number | null;
  /** Session key concerned, or null. */
  session: string | null;
  /** One human-readable line. */
  message: string;
  /** Structured details (e.g. from/to instance, kind, reason, wipe); always an object. */
  details: Record<string, unknown>;
}
