import { useDashboard } from '../app/dashboard-context.js';
import { ExitCell } from '../components/ExitCell.js';
import { StateBadge } from '../components/StateBadge.js';
import { SpareTag } from '../components/SpareTag.js';
import { formatByteRate, formatBytes, formatCount, formatRate } from '../logic/format.js';
import { HEALTH_STATES, countByState } from '../logic/health.js';
import { ratesOver } from '../logic/rates.js';

/** Rates are averaged over this many seconds of samples. */
const RATE_WINDOW_SECS = 10;

export function OverviewView() {
  const { live } = useDashboard();
  const snap = live.snapshot;
  if (snap === null) return <p className="muted">Waiting for the live stream…</p>;
  const { pool, instances } = snap;
  const counts = countByState(instances);
  const rates = ratesOver(live.samples, RATE_WINDOW_SECS);
  const total = Math.max(1, instances.length);

  return (
    <div className="stack">
      <section className="cards" aria-label="Pool">
        <Stat label="Size" value={formatCount(pool.size)} testId="size" />
        <Stat label="Ready" value={formatCount(pool.ready)} testId="ready" note={`of ${pool.size}`} />
        <Stat label="Routable" value={formatCount(pool.routable)} testId="routable" tone={pool.routable === 0 ? 'bad' : pool.routable < pool.ready ? 'warn' : 'ok'} />
        <Stat label="Sessions" value={formatCount(pool.sessions)} testId="sessions" />
        {pool.spares.size > 0 && (
          <Stat
            label="Warm spares"
            value={formatCount(pool.spares.warm)}
            testId="spares"
            note={`of ${pool.spares.size}; ${formatCount(pool.spares.in_use)} in use`}
            tone={pool.spares.warm === 0 ? 'warn' : 'ok'}
          />
        )}
      </section>

      <section className="cards" aria-label="Rates">
        <Stat label="Requests/s" value={formatRate(rates.requests)} note={`last ${RATE_WINDOW_SECS}s`} testId="rate-requests" />
        <Stat label="Failures/s" value={formatRate(rates.failures)} tone={rates.failures > 0 ? 'warn' : undefined} note={`last ${RATE_WINDOW_SECS}s`} testId="rate-failures" />
        <Stat label="Upload" value={formatByteRate(rates.bytesUp)} note="client → exit" testId="rate-up" />
        <Stat label="Download" value={formatByteRate(rates.bytesDown)} note="exit → client" testId="rate-down" />
      </section>

      <section className="cards" aria-label="Totals">
        <Stat label="Requests" value={formatCount(pool.totals.requests)} note="since start" testId="total-requests" />
        <Stat label="Failures" value={formatCount(pool.totals.failures)} note="since start" testId="total-failures" />
        <Stat label="Uploaded" value={formatBytes(pool.totals.bytes_up)} note="since start" />
        <Stat label="Downloaded" value={formatBytes(pool.totals.bytes_down)} note="since start" />
      </section>

      <section className="panel" aria-labelledby="health-title">
        <h2 id="health-title" className="panel-title">
          Health at a glance
        </h2>
        <div className="health-bar" role="img" aria-label={HEALTH_STATES.map((s) => `${counts[s]} ${s}`).join(', ')}>
          {HEALTH_STATES.filter((s) => counts[s] > 0).map((s) => (
            <div key={s} className={`health-seg state-${s}`} style={{ flexGrow: counts[s] / total }} title={`${counts[s]} ${s}`} />
          ))}
        </div>
        <ul className="legend">
          {HEALTH_STATES.map((s) => (
            <li key={s} data-count-state={s}>
              <StateBadge state={s} /> <strong>{counts[s]}</strong>
            </li>
          ))}
        </ul>
        <ul className="tiles" aria-label="Instances">
          {instances.map((i) => (
            <li key={i.id} className={`tile state-border-${i.health.state}`}>
              <a href="#/instances" className="tile-link">
                <span className="tile-id">#{i.id}</span>
                <StateBadge state={i.health.state} />
              </a>
              <ExitCell instance={i} />
              {i.spare && <SpareTag instance={i} />}
              {!i.ready && <progress max={100} value={i.bootstrap} aria-label={`instance ${i.id} bootstrap`} />}
            </li>
          ))}
        </ul>
      </section>

      <section className="panel" aria-labelledby="service-title">
        <h2 id="service-title" className="panel-title">
          Service
        </h2>
        <dl className="facts">
          <dt>Version</dt>
          <dd>{pool.version}</dd>
          <dt>SOCKS5 port</dt>
          <dd>
            <code>{pool.socks_port}</code>
          </dd>
          <dt>HTTP proxy port</dt>
          <dd>
            <code>{pool.http_port}</code>
          </dd>
          <dt>Configured size</dt>
          <dd>{pool.config.pool_size}</dd>
          <dt>Spares (WARM_SPARES)</dt>
          <dd>{pool.spares.size}</dd>
          <dt>Session TTL</dt>
          <dd>{pool.config.session_ttl}</dd>
          <dt>Default session</dt>
          <dd>{pool.config.default_session}</dd>
        </dl>
      </section>
    </div>
  );
}

function Stat({ label, value, note, tone, testId }: { label: string; value: string; note?: string; tone?: 'ok' | 'warn' | 'bad' | undefined; testId?: string }) {
  return (
    <div className={tone ? `card tone-${tone}` : 'card'} data-stat={testId}>
      <div className="card-label">{label}</div>
      <div className="card-value">{value}</div>
      {note !== undefined && <div className="card-note">{note}</div>}
    </div>
  );
}
