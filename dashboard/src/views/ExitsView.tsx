import { useState } from 'react';
import type { ExitBanView, ExitsView as ExitsResponse } from '../../../shared/api/views.js';
import { useDashboard } from '../app/dashboard-context.js';
import { ConfirmDialog } from '../components/ConfirmDialog.js';
import { useApiResource } from '../hooks/use-api-resource.js';
import { exitDownLabel, exitHolder, exitsSummary, fleetLine } from '../logic/exits.js';

/** The catalog is read every minute by the supervisor; polling faster would show nothing new. */
const REFRESH_MS = 10_000;

export function ExitsView() {
  const { api, notify } = useDashboard();
  const { data: exits, error, reload: load } = useApiResource<ExitsResponse>('/api/exits', REFRESH_MS);
  const [lifting, setLifting] = useState<ExitBanView | null>(null);

  return (
    <div className="stack">
      {error !== null && (
        <p className="error-text" role="alert">
          {error}
        </p>
      )}
      {exits !== null && (
        <>
          <section className="panel" aria-labelledby="exits-summary-title">
            <h2 id="exits-summary-title" className="panel-title">
              Exit supply
            </h2>
            <p data-exits-summary>{exitsSummary(exits)}</p>
            {exits.fleet !== null && <p data-fleet>{fleetLine(exits)}</p>}
            {exits.shortages.length > 0 && (
              <ul className="warning-list" aria-label="Shortages">
                {exits.shortages.map((s) => (
                  <li key={s.instance} data-shortage={s.instance}>
                    Instance {s.instance}: {s.reason}
                  </li>
                ))}
              </ul>
            )}
          </section>
          <div className="table-wrap">
            <table className="table exits">
              <caption className="sr-only">Exit relays</caption>
              <thead>
                <tr>
                  <th scope="col">Relay</th>
                  <th scope="col">Address</th>
                  <th scope="col">Block</th>
                  <th scope="col">Country</th>
                  <th scope="col">Bandwidth</th>
                  <th scope="col">Instances</th>
                  <th scope="col">Ban</th>
                </tr>
              </thead>
              <tbody>
                {exits.exits.map((e) => ({ e, familySize: exits.exits.filter((o) => o.family === e.family).length })).map(({ e, familySize }) => (
                  <tr key={e.fingerprint} data-exit={e.fingerprint}>
                    <th scope="row" title={e.fingerprint}>
                      {e.nickname}
                      {familySize > 1 && <span className="muted" title={`declared family ${e.family}`}> (family of {familySize})</span>}
                    </th>
                    <td data-address-source={e.address_source}>
                      <code>{e.address}</code>
                      {e.address_source !== 'published' && e.published_address !== e.address && (
                        <span className="muted" title={`${e.address_source === 'probe' ? 'measured through the exit' : 'from the Tor exit list'}; the relay publishes ${e.published_address}`}>
                          {' '}
                          (publishes <code>{e.published_address}</code>)
                        </span>
                      )}
                    </td>
                    <td>
                      <code>{e.block}</code>
                    </td>
                    <td>{e.country === '' ? '—' : e.country.toUpperCase()}</td>
                    <td className="num">{e.bandwidth}</td>
                    <td data-instances {...(e.held_by === null ? {} : { 'data-held-by': e.held_by })}>
                      {exitHolder(e)}
                    </td>
                    <td>
                      {e.banned === null ? (
                        <ExitDownStatus e={e} />
                      ) : (
                        <button type="button" className="btn btn-small btn-danger-quiet" title={`${e.banned.cause}: ${e.banned.reason}, until ${e.banned.until}`} aria-label={`Lift the ban of ${e.nickname}`} onClick={() => setLifting(e.banned)}>
                          Banned ({e.banned.cause}) · lift
                        </button>
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
            {exits.exits.length === 0 && <p className="muted pad">{exits.assigning ? 'The catalog has not been read yet.' : 'PIN_EXIT_RELAY is off: each tor picks its own exits.'}</p>}
          </div>
        </>
      )}
      {lifting !== null && (
        <ConfirmDialog
          title={`Lift the ban of ${lifting.nickname}?`}
          confirmLabel="Lift ban"
          onClose={() => setLifting(null)}
          onConfirm={async () => {
            await api.delete(`/api/exits/${encodeURIComponent(lifting.fingerprint)}/ban`);
            notify('info', `Ban of ${lifting.nickname} lifted`);
            await load();
          }}
        >
          <p>
            <code>{lifting.address}</code> was banned for {lifting.cause} ({lifting.reason}). Instances may be assigned it again at once.
          </p>
        </ConfirmDialog>
      )}
    </div>
  );
}

/** An exit the pool found dead (down, or back on probation), else a dash. */
function ExitDownStatus({ e }: { e: ExitsResponse['exits'][number] }) {
  const label = exitDownLabel(e);
  if (label === null) return <>—</>;
  return (
    <span data-exit-down={e.down?.state} title={label.title}>
      {label.text}
    </span>
  );
}
