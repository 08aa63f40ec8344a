import type { InstanceView } from '../../../shared/api/views.js';
import { exitDisplay } from '../logic/exit-display.js';

/** The exit of an instance: current (confirmed or probable), the retired one during a rotation, or none. */
export function ExitCell({ instance }: { instance: InstanceView }) {
  const d = exitDisplay(instance);
  switch (d.kind) {
    case 'current':
      return (
        <span className="exit" data-exit-ip={d.ip} data-exit-kind="current">
          <code>{d.ip}</code>
          {d.country !== '' && (
            <span className="country" title={`country ${d.country}`}>
              {d.country.toUpperCase()}
            </span>
          )}
          {d.confirmed ? (
            <span className="tag tag-ok" title="traffic has left through this exit">
              confirmed
            </span>
          ) : (
            <span className="tag" title="inferred from the instance's circuits; the next request confirms or corrects it">
              probable
            </span>
          )}
        </span>
      );
    case 'retired':
      return (
        <span className="exit" data-exit-ip="" data-retired-ip={d.ip} data-exit-kind="retired">
          <del title="the exit the rotation discarded">
            <code>{d.ip}</code>
          </del>
          <span className="tag tag-warn">rotating</span>
        </span>
      );
    case 'none':
      return (
        <span className="exit muted" data-exit-ip="" data-exit-kind="none">
          no exit yet
        </span>
      );
  }
}
