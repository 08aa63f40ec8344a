import type { HealthState } from '../../../shared/api/views.js';

export function StateBadge({ state }: { state: HealthState }) {
  return (
    <span className={`badge state-${state}`} data-state={state}>
      {state}
    </span>
  );
}
