import { useCallback, useEffect, useMemo, useState } from 'react';
import type { SessionRotateResult, SessionView } from '../../../shared/api/views.js';
import { useDashboard } from '../app/dashboard-context.js';
import { ConfirmDialog } from '../components/ConfirmDialog.js';
import { usePageVisible } from '../hooks/use-page-visible.js';
import { useNow } from '../hooks/use-now.js';
import { UnauthorizedError, describeError } from '../logic/api-errors.js';
import { formatAgo, formatBytes, formatCount } from '../logic/format.js';
import { countriesOf, filterSessions, filterSessionsByCountry, sessionCountries, sortSessions, type SessionSortKey } from '../logic/session-filter.js';

/** The session list is not in the stream; it is re-read this often while the view and the tab are visible. */
const REFRESH_MS = 3_000;

const SORTS: ReadonlyArray<[SessionSortKey, string]> = [
  ['last_seen', 'Last seen'],
  ['key', 'Key'],
  ['instance', 'Instance'],
  ['requests', 'Requests'],
  ['bytes', 'Traffic'],
];

export function SessionsView() {
  const { api, live, notify } = useDashboard();
  const visible = usePageVisible();
  const now = useNow();
  const [sessions, setSessions] = useState<readonly SessionView[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [query, setQuery] = useState('');
  const [country, setCountry] = useState('');
  const [sort, setSort] = useState<SessionSortKey>('last_seen');
  const [deleting, setDeleting] = useState<SessionView | null>(null);
  const [busyKey, setBusyKey] = useState<string | null>(null);

  const load = useCallback(
    async (signal?: AbortSignal) => {
      try {
        const list = await api.get<SessionView[]>('/api/sessions', signal);
        setSessions(list);
        setError(null);
      } catch (e) {
        if (e instanceof DOMException && e.name === 'AbortError') return;
        if (!(e instanceof UnauthorizedError)) setError(describeError(e));
      }
    },
    [api],
  );

  useEffect(() => {
    if (!visible) return;
    const ctrl = new AbortController();
    void load(ctrl.signal);
    const t = window.setInterval(() => void load(ctrl.signal), REFRESH_MS);
    return () => {
      window.clearInterval(t);
      ctrl.abort();
    };
  }, [visible, load]);

  const instances = live.snapshot?.instances;
  const exitOf = useCallback(
    (id: number): string => {
      const i = instances?.find((x) => x.id === id);
      return i === undefined ? '' : i.exit_ip || (i.retired_exit_ip ? `(${i.retired_exit_ip})` : '');
    },
    [instances],
  );
  const shown = useMemo(
    () => (sessions === null ? [] : sortSessions(filterSessionsByCountry(filterSessions(sessions, query, exitOf), country), sort)),
    [sessions, query, country, sort, exitOf],
  );
  const countries = useMemo(() => sessionCountries(sessions ?? []), [sessions]);

  const rotate = async (s: SessionView): Promise<void> => {
    setBusyKey(s.key);
    try {
      const r = await api.post<SessionRotateResult>(`/api/sessions/${encodeURIComponent(s.key)}/rotate`);
      notify('info', `Session ${r.session} moved to instance ${r.instance}${r.exit_ip ? ` (exit ${r.exit_ip})` : ''}`);
      await load();
    } catch (e) {
      notify('error', `Rotate ${s.key}: ${describeError(e)}`);
    } finally {
      setBusyKey(null);
    }
  };

  return (
    <div className="stack">
      <div className="toolbar" role="search">
        <label className="field-inline grow">
          <span>Filter</span>
          <input type="search" name="session-filter" placeholder="key, exit IP or #instance" value={query} onChange={(e) => setQuery(e.target.value)} />
        </label>
        <label className="field-inline">
          <span>Country</span>
          <select name="session-country" value={country} onChange={(e) => setCountry(e.target.value)}>
            <option value="">all</option>
            {countries.map((c) => (
              <option key={c} value={c}>
                {c}
              </option>
            ))}
          </select>
        </label>
        <label className="field-inline">
          <span>Sort by</span>
          <select value={sort} onChange={(e) => setSort(e.target.value as SessionSortKey)}>
            {SORTS.map(([k, label]) => (
              <option key={k} value={k}>
                {label}
              </option>
            ))}
          </select>
        </label>
        <button type="button" className="btn" onClick={() => void load()}>
          Refresh
        </button>
        <span className="muted small" aria-live="polite">
          {sessions === null ? 'loading…' : `${shown.length} of ${sessions.length} sessions`}
          {visible ? ` · every ${REFRESH_MS / 1000}s` : ''}
        </span>
      </div>
      {error !== null && (
        <p className="error-text" role="alert">
          {error}
        </p>
      )}
      {sessions !== null && sessions.length === 0 && <p className="muted">No sessions. A session appears when a client first uses a key.</p>}
      {shown.length > 0 && (
        <div className="table-wrap">
          <table className="table sessions">
            <caption className="sr-only">Sessions</caption>
            <thead>
              <tr>
                <th scope="col">Key</th>
                <th scope="col" className="num">
                  Instance
                </th>
                <th scope="col">Exit</th>
                <th scope="col">Country</th>
                <th scope="col" className="num">
                  Active
                </th>
                <th scope="col" className="num">
                  Requests
                </th>
                <th scope="col" className="num">
                  Failures
                </th>
                <th scope="col" className="num">
                  ↑ / ↓
                </th>
                <th scope="col">Created</th>
                <th scope="col">Last seen</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {shown.map((s) => (
                <tr key={s.key} data-session={s.key}>
                  <th scope="row">
                    <code className="session-key">{s.key}</code>
                  </th>
                  <td className="num">#{s.instance}</td>
                  <td>
                    <code>{exitOf(s.instance) || '–'}</code>
                  </td>
                  <td data-country={countriesOf(s).join(' ')}>
                    {s.exit_country || '–'}
                    {s.params.countries.length > 0 && <span className="muted small"> (asked {s.params.countries.join(', ')})</span>}
                    {s.params.mode === 'rotating' && <span className="tag"> rotating</span>}
                    {s.params.lifetime_secs !== null && <span className="muted small"> · ttl {s.params.lifetime_secs < 120 ? `${s.params.lifetime_secs} s` : `${Math.round(s.params.lifetime_secs / 60)} min`}</span>}
                  </td>
                  <td className="num">{s.active}</td>
                  <td className="num">{formatCount(s.requests)}</td>
                  <td className="num">{formatCount(s.failures)}</td>
                  <td className="num">
                    {formatBytes(s.bytes_up)} / {formatBytes(s.bytes_down)}
                  </td>
                  <td title={s.created_at}>{formatAgo(s.created_at, now)}</td>
                  <td title={s.last_seen}>{formatAgo(s.last_seen, now)}</td>
                  <td>
                    <div className="actions">
                      <button type="button" className="btn btn-small" disabled={busyKey === s.key} onClick={() => void rotate(s)} aria-label={`Rotate session ${s.key}`}>
                        Rotate
                      </button>
                      <button type="button" className="btn btn-small btn-danger-quiet" onClick={() => setDeleting(s)} aria-label={`Delete session ${s.key}`}>
                        Delete
                      </button>
                    </div>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {deleting !== null && (
        <ConfirmDialog
          title={`Delete session ${deleting.key}?`}
          confirmLabel="Delete"
          destructive
          onClose={() => setDeleting(null)}
          onConfirm={async () => {
            await api.delete(`/api/sessions/${encodeURIComponent(deleting.key)}`);
            notify('info', `Session ${deleting.key} deleted`);
            await load();
          }}
        >
          <p>The session is unpinned. Its next request is assigned an instance afresh, probably with another exit.</p>
        </ConfirmDialog>
      )}
    </div>
  );
}
