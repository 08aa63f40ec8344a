import type { HealthView } from '../../../shared/api/views.js';
import { pressureLevel, quarantineFraction } from '../logic/health.js';

/** failure_score against quarantine_score: how close the instance is to quarantine. */
export function ScoreBar({ health }: { health: Pick<HealthView, 'failure_score' | 'quarantine_score'> }) {
  const fraction = quarantineFraction(health);
  const label = `failure score ${health.failure_score.toFixed(2)} of ${health.quarantine_score.toFixed(2)}`;
  return (
    <div className="score">
      <div
        className="meter"
        role="meter"
        aria-label={label}
        aria-valuemin={0}
        aria-valuemax={health.quarantine_score}
        aria-valuenow={Math.min(health.failure_score, health.quarantine_score)}
        title={label}
      >
        <div className={`meter-fill level-${pressureLevel(fraction)}`} style={{ width: `${(fraction * 100).toFixed(1)}%` }} />
      </div>
      <span className="score-text">
        {health.failure_score.toFixed(1)} / {health.quarantine_score.toFixed(1)}
      </span>
    </div>
  );
}
