import type { AuditEvent, AuditType } from '../../../shared/api/audit-event.js';

/** Events the dashboard keeps in memory (the server's ring is the record; this is a view). */
export const MAX_KEPT_EVENTS = 1_000;

/**
 * Merges events from GET /api/events and from the stream into one newest-first list without
 * duplicates. The id is the supervisor's sequence number, so it orders and identifies them.
 */
export function mergeEvents(existing: readonly AuditEvent[], incoming: readonly AuditEvent[], max = MAX_KEPT_EVENTS): readonly AuditEvent[] {
  if (incoming.length === 0) return existing;
  const byId = new Map<number, AuditEvent>();
  for (const e of existing) byId.set(e.id, e);
  for (const e of incoming) byId.set(e.id, e);
  const merged = [...byId.values()].sort((a, b) => b.id - a.id);
  return merged.length > max ? merged.slice(0, max) : merged;
}

/**
 * The events that pass the type filter (an empty set passes every type) and whose message,
 * session or instance contain `text` (case-insensitive).
 */
export function filterEvents(events: readonly AuditEvent[], types: ReadonlySet<AuditType>, text: string): readonly AuditEvent[] {
  const needle = text.trim().toLowerCase();
  return events.filter((e) => {
    if (types.size > 0 && !types.has(e.type)) return false;
    if (needle === '') return true;
    return (
      e.message.toLowerCase().includes(needle) ||
      (e.session ?? '').toLowerCase().includes(needle) ||
      (e.instance !== null && `#${e.instance}` === needle) ||
      (e.instance !== null && String(e.instance) === needle)
    );
  });
}
