import { useEffect, useMemo, useState } from 'react';
import type { StatsSample } from '../../../shared/api/views.js';
import { useDashboard } from '../app/dashboard-context.js';
import { TimeChart } from '../components/TimeChart.js';
import { usePageVisible } from '../hooks/use-page-visible.js';
import { UnauthorizedError, describeError } from '../logic/api-errors.js';
import { formatBytes, formatCount, formatLatency, formatRate } from '../logic/format.js';
import { extendHistory, historyColumns } from '../logic/history-series.js';

type Range = 'fine' | 'long';

/** The long series changes once a minute; it is re-read that often while visible. */
const LONG_REFRESH_MS = 60_000;
/** Points kept when the fine series grows from the stream. */
const FINE_MAX_POINTS = 900;

export function TimelineView() {
  const { api, live } = useDashboard();
  const visible = usePageVisible();
  const [range, setRange] = useState<Range>('fine');
  const [samples, setSamples] = useState<readonly StatsSample[] | null>(null);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    if (!visible) return;
    const ctrl = new AbortController();
    const load = (): void => {
      api
        .get<StatsSample[]>(range === 'long' ? '/api/stats/history?range=long' : '/api/stats/history', ctrl.signal)
        .then((s) => {
          setSamples(s);
          setError(null);
        })
        .catch((e: unknown) => {
          if (e instanceof DOMException && e.name === 'AbortError') return;
          if (!(e instanceof UnauthorizedError)) setError(describeError(e));
        });
    };
    setSamples(null);
    load();
    const t = range === 'long' ? window.setInterval(load, LONG_REFRESH_MS) : null;
    return () => {
      if (t !== null) window.clearInterval(t);
      ctrl.abort();
    };
  }, [api, range, visible]);

  // The fine series grows live from the samples the stream brings each second.
  const newest = live.snapshot?.stats ?? null;
  useEffect(() => {
    if (range !== 'fine' || newest === null) return;
    setSamples((s) => (s === null ? s : extendHistory(s, newest, Math.max(FINE_MAX_POINTS, s.length))));
  }, [newest, range]);

  const cols = useMemo(() => historyColumns(samples ?? []), [samples]);

  return (
    <div className="stack">
      <div className="toolbar">
        <div className="chips" role="group" aria-label="Range">
          <button type="button" className="chip" aria-pressed={range === 'fine'} onClick={() => setRange('fine')}>
            Fine (per second)
          </button>
          <button type="button" className="chip" aria-pressed={range === 'long'} onClick={() => setRange('long')}>
            Long (per minute)
          </button>
        </div>
        <span className="muted small">{samples === null ? 'loading…' : `${cols.time.length} points`}</span>
      </div>
      {error !== null && (
        <p className="error-text" role="alert">
          {error}
        </p>
      )}
      {samples !== null && cols.time.length === 0 && <p className="muted">No samples yet.</p>}
      {samples !== null && cols.time.length > 0 && (
        <div className="charts">
          <TimeChart
            title="Requests and failures per second"
            time={cols.time}
            format={formatRate}
            series={[
              { label: 'requests/s', colorVar: '--series-1', values: cols.requests },
              { label: 'failures/s', colorVar: '--series-bad', values: cols.failures },
            ]}
          />
          <TimeChart
            title="Traffic per second"
            time={cols.time}
            format={(v) => `${formatBytes(v)}/s`}
            series={[
              { label: 'up', colorVar: '--series-2', values: cols.bytesUp },
              { label: 'down', colorVar: '--series-1', values: cols.bytesDown },
            ]}
          />
          <TimeChart
            title="Connection latency"
            time={cols.time}
            format={formatLatency}
            series={[
              { label: 'p50', colorVar: '--series-1', values: cols.p50 },
              { label: 'p99', colorVar: '--series-3', values: cols.p99 },
            ]}
          />
          <TimeChart
            title="Routable instances and sessions"
            time={cols.time}
            format={formatCount}
            series={[
              { label: 'routable', colorVar: '--series-ok', values: cols.routable },
              { label: 'sessions', colorVar: '--series-2', values: cols.sessions },
            ]}
          />
        </div>
      )}
    </div>
  );
}
