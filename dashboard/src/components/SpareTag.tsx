import type { InstanceView } from '../../../shared/api/views.js';

/** A spare (WARM_SPARES): warm while it waits without sessions, in use once sessions rotated onto it. */
export function SpareTag({ instance: i }: { instance: InstanceView }) {
  const inUse = i.sessions > 0;
  return (
    <span
      className={inUse ? 'tag' : 'tag tag-ok'}
      data-spare-tag={inUse ? 'in-use' : 'warm'}
      title={
        inUse
          ? 'a spare carrying sessions that rotated onto it: it takes no new session, and gets a new exit once they leave'
          : 'a spare kept for session rotations on an exit of its own (WARM_SPARES): it takes no new session'
      }
    >
      {inUse ? 'spare, in use' : 'spare'}
    </span>
  );
}
