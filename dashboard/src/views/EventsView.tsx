import { useEffect, useMemo, useState } from 'react';
import { AUDIT_TYPES, type AuditEvent, type AuditType } from '../../../shared/api/audit-event.js';
import { useDashboard } from '../app/dashboard-context.js';
import { UnauthorizedError, describeError } from '../logic/api-errors.js';
import { filterEvents } from '../logic/audit-log.js';
import { formatUtc } from '../logic/format.js';

/** How many past events are read when the view opens (the stream adds the new ones). */
const INITIAL_LIMIT = 500;
/** Rows rendered at most; the filter narrows the rest. */
const MAX_ROWS = 300;

export function EventsView() {
  const { api, live, dispatch } = useDashboard();
  const [types, setTypes] = useState<ReadonlySet<AuditType>>(new Set());
  const [text, setText] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [loaded, setLoaded] = useState(false);

  useEffect(() => {
    const ctrl = new AbortController();
    api
      .get<AuditEvent[]>(`/api/events?limit=${INITIAL_LIMIT}`, ctrl.signal)
      .then((events) => {
        dispatch({ type: 'events', events });
        setLoaded(true);
      })
      .catch((e: unknown) => {
        if (e instanceof DOMException && e.name === 'AbortError') return;
        if (!(e instanceof UnauthorizedError)) setError(describeError(e));
      });
    return () => ctrl.abort();
  }, [api, dispatch]);

  const shown = useMemo(() => filterEvents(live.events, types, text), [live.events, types, text]);

  const toggle = (t: AuditType): void =>
    setTypes((s) => {
      const next = new Set(s);
      if (next.has(t)) next.delete(t);
      else next.add(t);
      return next;
    });

  return (
    <div className="stack">
      <div className="toolbar">
        <div className="chips" role="group" aria-label="Filter by type">
          <button type="button" className="chip" aria-pressed={types.size === 0} onClick={() => setTypes(new Set())}>
            all
          </button>
          {AUDIT_TYPES.map((t) => (
            <button key={t} type="button" className="chip" aria-pressed={types.has(t)} data-type-filter={t} onClick={() => toggle(t)}>
              {t}
            </button>
          ))}
        </div>
        <label className="field-inline grow">
          <span>Search</span>
          <input type="search" name="event-search" placeholder="message, session or #instance" value={text} onChange={(e) => setText(e.target.value)} />
        </label>
        <span className="muted small">
          {loaded ? `${shown.length} of ${live.events.length}` : 'loading…'}
          {live.status.kind === 'live' ? ' · live' : ''}
        </span>
      </div>
      {error !== null && (
        <p className="error-text" role="alert">
          {error}
        </p>
      )}
      <div className="table-wrap">
        <table className="table events">
          <caption className="sr-only">Audit events, newest first</caption>
          <thead>
            <tr>
              <th scope="col">Time (UTC)</th>
              <th scope="col">Type</th>
              <th scope="col" className="num">
                Instance
              </th>
              <th scope="col">Session</th>
              <th scope="col">Message</th>
            </tr>
          </thead>
          <tbody aria-live="polite" aria-relevant="additions">
            {shown.slice(0, MAX_ROWS).map((e) => (
              <tr key={e.id} data-event-id={e.id} data-event-type={e.type}>
                <td className="nowrap">
                  <time dateTime={e.time}>{formatUtc(e.time)}</time>
                </td>
                <td>
                  <span className={`badge type-${e.type}`}>{e.type}</span>
                </td>
                <td className="num">{e.instance === null ? '' : `#${e.instance}`}</td>
                <td>{e.session === null ? '' : <code>{e.session}</code>}</td>
                <td className="event-message" title={Object.keys(e.details).length ? JSON.stringify(e.details) : undefined}>
                  {e.message}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
        {loaded && shown.length === 0 && <p className="muted pad">No events match.</p>}
      </div>
    </div>
  );
}
