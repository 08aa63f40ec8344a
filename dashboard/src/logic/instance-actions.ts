import type { InstanceView } from '../../../shared/api/views.js';

export type InstanceActionName = 'rotate' | 'restart' | 'quarantine' | 'release' | 'drain';

export interface InstanceActionSpec {
  name: InstanceActionName;
  label: string;
  /** What the confirmation dialog says happens. */
  explain: string;
  /** Styled as dangerous (it takes the instance out of service for a while). */
  destructive: boolean;
}

export const INSTANCE_ACTIONS: readonly InstanceActionSpec[] = [
  { name: 'rotate', label: 'Rotate', destructive: false, explain: 'Build a new circuit. Sessions move to other instances first; the exit may change.' },
  { name: 'restart', label: 'Restart', destructive: true, explain: 'Restart the tor process. Wiping its state gives it a new identity; keeping it reuses guards and the cached consensus.' },
  { name: 'quarantine', label: 'Quarantine', destructive: true, explain: 'Take the instance out of rotation and move its sessions away. The remediation ladder then works it back.' },
  { name: 'release', label: 'Release', destructive: false, explain: 'Clear quarantine and accumulated failures.' },
  { name: 'drain', label: 'Drain', destructive: false, explain: 'Move its sessions to other instances without quarantining it.' },
];

/**
 * Why an action cannot apply to the instance as the dashboard sees it, or null. Only the
 * certain cases are blocked here (the API's 409s); the server has the last word on the rest.
 */
export function actionBlockedReason(action: InstanceActionName, i: Pick<InstanceView, 'ready'>): string | null {
  if (action === 'rotate' && !i.ready) return 'not bootstrapped yet';
  return null;
}

/** The API path of an action (restart takes the wipe flag in the query). */
export function actionPath(id: number, action: InstanceActionName, wipe: boolean): string {
  const base = `/api/instances/${id}/${action}`;
  return action === 'restart' ? `${base}?wipe=${wipe ? 'true' : 'false'}` : base;
}

/** Pool resize input: an integer from 1 to max, or the reason it is not. */
export function parsePoolSize(text: string, max: number): { ok: true; size: number } | { ok: false; reason: string } {
  const trimmed = text.trim();
  if (!/^\d+$/.test(trimmed)) return { ok: false, reason: 'enter a whole number' };
  const size = Number(trimmed);
  if (size < 1 || size > max) return { ok: false, reason: `size must be from 1 to ${max}` };
  return { ok: true, size };
}
