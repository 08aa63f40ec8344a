import { Suspense, lazy, useCallback, useEffect, useMemo, useRef, useState } from 'react';
import type { ApiClient } from '../api/client.js';
import { useLiveData } from '../hooks/use-live-data.js';
import { useNow } from '../hooks/use-now.js';
import { describeStreamStatus } from '../logic/stream-status.js';
import { VIEWS, VIEW_TITLES, hashOf, viewFromHash, type ViewName } from '../logic/views.js';
import { EventsView } from '../views/EventsView.js';
import { ExitsView } from '../views/ExitsView.js';
import { InstancesView } from '../views/InstancesView.js';
import { OverviewView } from '../views/OverviewView.js';
import { SessionsView } from '../views/SessionsView.js';
import { TokensView } from '../views/TokensView.js';
import { DashboardContext, type DashboardContextValue, type Notice } from './dashboard-context.js';

// uPlot is only needed on the Timeline: it is loaded with that view, not with the first page.
const TimelineView = lazy(() => import('../views/TimelineView.js').then((m) => ({ default: m.TimelineView })));

interface ShellProps {
  api: ApiClient;
  user: string;
  authDisabled: boolean;
  onSignOut(): void;
}

const NOTICE_MS = 6_000;

export function Shell({ api, user, authDisabled, onSignOut }: ShellProps) {
  const [live, dispatch] = useLiveData(api);
  const [view, setView] = useState<ViewName>(() => viewFromHash(window.location.hash));
  const [notices, setNotices] = useState<Notice[]>([]);
  const nextNotice = useRef(1);
  const mainRef = useRef<HTMLElement>(null);
  const now = useNow();

  useEffect(() => {
    const onHash = (): void => setView(viewFromHash(window.location.hash));
    window.addEventListener('hashchange', onHash);
    return () => window.removeEventListener('hashchange', onHash);
  }, []);

  useEffect(() => {
    document.title = `${VIEW_TITLES[view]} · exitpool`;
  }, [view]);

  const notify = useCallback((kind: Notice['kind'], text: string) => {
    const id = nextNotice.current++;
    setNotices((n) => [...n.slice(-3), { id, kind, text }]);
    window.setTimeout(() => setNotices((n) => n.filter((x) => x.id !== id)), NOTICE_MS);
  }, []);

  const ctx = useMemo<DashboardContextValue>(() => ({ api, live, dispatch, notify }), [api, live, dispatch, notify]);
  const pool = live.snapshot?.pool;

  return (
    <DashboardContext.Provider value={ctx}>
      <a className="skip-link" href="#main" onClick={(e) => { e.preventDefault(); mainRef.current?.focus(); }}>
        Skip to content
      </a>
      <header className="topbar">
        <div className="brand">
          <span className="brand-mark" aria-hidden="true" />
          exitpool
          {pool !== undefined && <span className="version">v{pool.version}</span>}
        </div>
        <nav aria-label="Views" className="nav">
          {VIEWS.map((v) => (
            <a key={v} href={hashOf(v)} className="nav-link" aria-current={v === view ? 'page' : undefined}>
              {VIEW_TITLES[v]}
            </a>
          ))}
        </nav>
        <div className="topbar-end">
          <span className={`stream-status stream-${live.status.kind}`} role="status" title="live stream">
            <span className="dot" aria-hidden="true" />
            {describeStreamStatus(live.status, now)}
          </span>
          {authDisabled ? (
            <span className="tag tag-warn auth-disabled" title="AUTH_DISABLED is on: the API and the proxy ports accept anyone">
              auth disabled
            </span>
          ) : (
            <>
              <span className="muted user">{user}</span>
              <button type="button" className="btn btn-quiet" onClick={onSignOut}>
                Sign out
              </button>
            </>
          )}
        </div>
      </header>
      <main id="main" ref={mainRef} tabIndex={-1} className="main" aria-labelledby="view-title">
        <h1 id="view-title" className="view-title">
          {VIEW_TITLES[view]}
        </h1>
        {view === 'overview' && <OverviewView />}
        {view === 'instances' && <InstancesView />}
        {view === 'exits' && <ExitsView />}
        {view === 'sessions' && <SessionsView />}
        {view === 'events' && <EventsView />}
        {view === 'tokens' && <TokensView />}
        {view === 'timeline' && (
          <Suspense fallback={<p className="muted">Loading charts…</p>}>
            <TimelineView />
          </Suspense>
        )}
      </main>
      <div className="notices" aria-live="polite">
        {notices.map((n) => (
          <div key={n.id} className={`notice notice-${n.kind}`} role={n.kind === 'error' ? 'alert' : 'status'}>
            {n.text}
          </div>
        ))}
      </div>
    </DashboardContext.Provider>
  );
}
