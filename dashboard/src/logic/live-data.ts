import type { AuditEvent } from '../../../shared/api/audit-event.js';
import type { InstanceView, StatsSample } from '../../../shared/api/views.js';
import { mergeEvents } from './audit-log.js';
import { appendSample } from './rates.js';
import { withInstance, type StreamSnapshot } from './snapshot.js';
import type { StreamStatus } from './stream-status.js';

/** Everything the views read from the live stream, folded by `liveReducer`. */
export interface LiveData {
  snapshot: StreamSnapshot | null;
  /** Recent per-second samples, oldest first (for rates and the fine timeline). */
  samples: readonly StatsSample[];
  /** Audit events seen (stream and GET /api/events), newest first. */
  events: readonly AuditEvent[];
  status: StreamStatus;
}

export type LiveAction =
  | { type: 'snapshot'; snapshot: StreamSnapshot }
  | { type: 'event'; event: AuditEvent }
  | { type: 'events'; events: readonly AuditEvent[] }
  | { type: 'status'; status: StreamStatus }
  | { type: 'instance'; instance: InstanceView };

export const INITIAL_LIVE_DATA: LiveData = { snapshot: null, samples: [], events: [], status: { kind: 'connecting' } };

export function liveReducer(state: LiveData, action: LiveAction): LiveData {
  switch (action.type) {
    case 'snapshot':
      return { ...state, snapshot: action.snapshot, samples: appendSample(state.samples, action.snapshot.stats) };
    case 'event':
      return { ...state, events: mergeEvents(state.events, [action.event]) };
    case 'events':
      return { ...state, events: mergeEvents(state.events, action.events) };
    case 'status':
      return { ...state, status: action.status };
    case 'instance':
      return state.snapshot === null ? state : { ...state, snapshot: withInstance(state.snapshot, action.instance) };
  }
}
