import { HEALTH_STATES } from '../../shared/api/views.js';
import { FAILURE_KINDS, type FailureKind } from '../../shared/health/failure-kind.js';
import type { HealthSnapshot } from '../health/health-snapshot.js';
import { REMEDIATION_RUNGS, type PlanCause, type RemediationRung } from '../health/remediation-ladder.js';
import {
  booleanField,
  instanceIdKey,
  InvalidStoredRecord,
  listField,
  MAX_STORED_COUNT,
  MAX_STORED_TIME,
  numberField,
  objectField,
  oneOfField,
  parseObject,
  type StoredObject,
} from './stored-value.js';

const PLAN_CAUSES: readonly PlanCause[] = ['first', 'recurrence', 'retry', 'escalation'];
/** More failures than any window holds in practice; a record with more is not ours. */
const MAX_STORED_WINDOW = 100_000;

/** Stored under the instance id. */
export function encodeHealth(s: HealthSnapshot): string {
  return JSON.stringify(s);
}

function nullable<T>(o: StoredObject, name: string, read: () => T): T | null {
  return o[name] === null ? null : read();
}

export function decodeHealth(key: string, text: string): { instance: number; snapshot: HealthSnapshot } {
  const instance = instanceIdKey(key);
  const o = parseObject(text);
  const window = listField(o, 'window', MAX_STORED_WINDOW).map((raw) => {
    if (typeof raw !== 'object' || raw === null) throw new InvalidStoredRecord('window: an entry is not an object');
    const e = raw as StoredObject;
    return { at: numberField(e, 'at', 0, MAX_STORED_TIME), kind: oneOfField(e, 'kind', FAILURE_KINDS), inRun: booleanField(e, 'inRun') };
  });
  const since = objectField(o, 'sinceRelease');
  const byKindRaw = objectField(since, 'byKind');
  const byKind: Partial<Record<FailureKind, number>> = {};
  for (const kind of Object.keys(byKindRaw)) {
    if (!(FAILURE_KINDS as readonly string[]).includes(kind)) throw new InvalidStoredRecord(`byKind: unknown kind ${kind.slice(0, 32)}`);
    byKind[kind as FailureKind] = numberField(byKindRaw, kind, 0, MAX_STORED_COUNT);
  }
  const ladder = objectField(o, 'ladder');
  const pending = o.pending === null ? null : objectField(o, 'pending');
  const snapshot: HealthSnapshot = {
    state: oneOfField(o, 'state', HEALTH_STATES),
    window,
    sinceRelease: { transport: numberField(since, 'transport', 0, MAX_STORED_COUNT), client: numberField(since, 'client', 0, MAX_STORED_COUNT), byKind },
    remediations: numberField(o, 'remediations', 0, MAX_STORED_COUNT),
    ladder: {
      rung: nullable(ladder, 'rung', () => oneOfField(ladder, 'rung', REMEDIATION_RUNGS as readonly RemediationRung[])),
      attemptsAtRung: numberField(ladder, 'attemptsAtRung', 0, MAX_STORED_COUNT),
      lastCompletedAt: nullable(ladder, 'lastCompletedAt', () => numberField(ladder, 'lastCompletedAt', 0, MAX_STORED_TIME)),
      active: booleanField(ladder, 'active'),
    },
    pending:
      pending === null
        ? null
        : {
            rung: oneOfField(pending, 'rung', REMEDIATION_RUNGS as readonly RemediationRung[]),
            attempt: numberField(pending, 'attempt', 1, MAX_STORED_COUNT),
            cause: oneOfField(pending, 'cause', PLAN_CAUSES),
            dueAt: numberField(pending, 'dueAt', 0, MAX_STORED_TIME),
          },
  };
  return { instance, snapshot };
}
