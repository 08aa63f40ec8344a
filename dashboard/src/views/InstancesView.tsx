import { Fragment, useState } from 'react';
import type { InstanceView } from '../../../shared/api/views.js';
import { useDashboard } from '../app/dashboard-context.js';
import { ConfirmDialog } from '../components/ConfirmDialog.js';
import { ExitCell } from '../components/ExitCell.js';
import { ScoreBar } from '../components/ScoreBar.js';
import { SpareTag } from '../components/SpareTag.js';
import { StateBadge } from '../components/StateBadge.js';
import { exitIpOrigin } from '../logic/exit-display.js';
import { formatBytes, formatCount, formatDuration, formatLatency, formatUtc } from '../logic/format.js';
import { formatFailureKinds } from '../logic/health.js';
import { INSTANCE_ACTIONS, actionBlockedReason, actionPath, type InstanceActionSpec } from '../logic/instance-actions.js';
import { PoolControls } from './PoolControls.js';

interface PendingAction {
  spec: InstanceActionSpec;
  instance: InstanceView;
}

export function InstancesView() {
  const { live } = useDashboard();
  const [expanded, setExpanded] = useState<ReadonlySet<number>>(new Set());
  const [pending, setPending] = useState<PendingAction | null>(null);
  const snap = live.snapshot;
  if (snap === null) return <p className="muted">Waiting for the live stream…</p>;

  const toggle = (id: number): void =>
    setExpanded((s) => {
      const next = new Set(s);
      if (next.has(id)) next.delete(id);
      else next.add(id);
      return next;
    });

  return (
    <div className="stack">
      <PoolControls size={snap.pool.size} spares={snap.pool.spares.size} />
      <div className="table-wrap">
        <table className="table instances">
          <caption className="sr-only">Instances, live</caption>
          <thead>
            <tr>
              <th scope="col">#</th>
              <th scope="col">State</th>
              <th scope="col">Exit</th>
              <th scope="col" className="num">
                Sessions
              </th>
              <th scope="col" className="num">
                Requests / failures
              </th>
              <th scope="col" className="num">
                Traffic ↑ / ↓
              </th>
              <th scope="col">Quarantine pressure</th>
              <th scope="col" className="num">
                Uptime
              </th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {snap.instances.map((i) => {
              const open = expanded.has(i.id);
              return (
                <Fragment key={i.id}>
                  <tr data-instance={i.id} data-state={i.health.state} data-ready={i.ready ? 'true' : 'false'} data-spare={i.spare ? 'true' : 'false'}>
                    <th scope="row">
                      <button
                        type="button"
                        className="btn btn-quiet btn-small expander"
                        aria-expanded={open}
                        aria-controls={`instance-details-${i.id}`}
                        onClick={() => toggle(i.id)}
                        aria-label={`Details of instance ${i.id}`}
                      >
                        <span aria-hidden="true">{open ? '▾' : '▸'}</span> {i.id}
                      </button>
                    </th>
                    <td>
                      <StateBadge state={i.health.state} />
                      {!i.ready && (
                        <div className="bootstrap">
                          <progress max={100} value={i.bootstrap} aria-label={`instance ${i.id} bootstrap progress`} />
                          <span className="small">{i.bootstrap}%</span>
                        </div>
                      )}
                      {!i.running && <span className="tag tag-bad">stopped</span>}
                      {i.running && !i.responsive && (
                        <span className="tag tag-bad" title="its tor does not answer its control port: out of rotation until it answers, restarted after a minute of silence">
                          not answering
                        </span>
                      )}
                      {i.draining && (
                        <span className="tag tag-warn" title="takes no new sessions until released">
                          draining
                        </span>
                      )}
                      {i.spare && <SpareTag instance={i} />}
                    </td>
                    <td>
                      <ExitCell instance={i} />
                    </td>
                    <td className="num">{formatCount(i.sessions)}</td>
                    <td className="num">
                      {formatCount(i.totals.requests)} / <span className={i.totals.failures > 0 ? 'warn-text' : undefined}>{formatCount(i.totals.failures)}</span>
                    </td>
                    <td className="num">
                      {formatBytes(i.totals.bytes_up)} / {formatBytes(i.totals.bytes_down)}
                    </td>
                    <td>
                      <ScoreBar health={i.health} />
                    </td>
                    <td className="num">{i.running ? formatDuration(i.uptime_secs) : '–'}</td>
                    <td>
                      <div className="actions">
                        {INSTANCE_ACTIONS.map((spec) => {
                          const blocked = actionBlockedReason(spec.name, i);
                          return (
                            <button
                              key={spec.name}
                              type="button"
                              className="btn btn-small"
                              data-action={spec.name}
                              disabled={blocked !== null}
                              title={blocked ?? spec.explain}
                              aria-label={`${spec.label} instance ${i.id}`}
                              onClick={() => setPending({ spec, instance: i })}
                            >
                              {spec.label}
                            </button>
                          );
                        })}
                      </div>
                    </td>
                  </tr>
                  {open && (
                    <tr className="details-row" id={`instance-details-${i.id}`}>
                      <td colSpan={9}>
                        <InstanceDetails instance={i} />
                      </td>
                    </tr>
                  )}
                </Fragment>
              );
            })}
          </tbody>
        </table>
      </div>
      {pending !== null && <ActionDialog pending={pending} onClose={() => setPending(null)} />}
    </div>
  );
}

function InstanceDetails({ instance: i }: { instance: InstanceView }) {
  const h = i.health;
  return (
    <div className="details-grid">
      <dl className="facts">
        <dt>Ready</dt>
        <dd>{i.ready ? 'yes' : 'no'}</dd>
        <dt>Running</dt>
        <dd>{i.running ? 'yes' : 'no'}</dd>
        <dt>Bootstrap</dt>
        <dd>{i.bootstrap}%</dd>
        <dt>PID</dt>
        <dd>
          <code>{i.pid || '–'}</code>
        </dd>
        <dt>SOCKS endpoint</dt>
        <dd>
          <code>{i.socks_addr}</code>
        </dd>
        <dt>Uptime</dt>
        <dd>{formatDuration(i.uptime_secs)}</dd>
      </dl>
      <dl className="facts">
        <dt>Exit IP</dt>
        <dd>
          <code>{i.exit_ip || '–'}</code>
        </dd>
        <dt>Exit IP from</dt>
        <dd>{exitIpOrigin(i, formatUtc)}</dd>
        <dt>Published address</dt>
        <dd>
          <code>{i.published_exit_ip || '–'}</code>
        </dd>
        <dt>Exit country</dt>
        <dd>{i.exit_country || '–'}</dd>
        <dt>Exit nickname</dt>
        <dd>{i.exit_nickname || '–'}</dd>
        <dt>Exit confirmed</dt>
        <dd>{i.exit_confirmed ? 'yes' : 'no (probable)'}</dd>
        <dt>Retired exit</dt>
        <dd>
          <code>{i.retired_exit_ip || '–'}</code>
        </dd>
        <dt>Pinned exit</dt>
        <dd>{i.pinned_exit || 'not pinned'}</dd>
      </dl>
      <dl className="facts">
        <dt>Failure score</dt>
        <dd>
          {h.failure_score.toFixed(2)} of {h.quarantine_score.toFixed(2)}
        </dd>
        <dt>Failures in window</dt>
        <dd>{h.failures_in_window}</dd>
        <dt>Consecutive failures</dt>
        <dd>{h.consecutive_failures}</dd>
        <dt>Transport / client</dt>
        <dd>
          {h.transport_failures} / {h.client_failures}
        </dd>
        <dt>By kind</dt>
        <dd>{formatFailureKinds(h.failures_by_kind) || 'none'}</dd>
        <dt>Remediations</dt>
        <dd>
          {h.remediations}
          {h.remediation_rung !== '' && ` (rung: ${h.remediation_rung})`}
        </dd>
      </dl>
      <dl className="facts">
        <dt>Requests</dt>
        <dd>{formatCount(i.totals.requests)}</dd>
        <dt>Failures</dt>
        <dd>{formatCount(i.totals.failures)}</dd>
        <dt>Uploaded</dt>
        <dd>{formatBytes(i.totals.bytes_up)}</dd>
        <dt>Downloaded</dt>
        <dd>{formatBytes(i.totals.bytes_down)}</dd>
        <dt>Latency</dt>
        <dd>{formatLatency(i.totals.latency_ms)}</dd>
      </dl>
    </div>
  );
}

function ActionDialog({ pending, onClose }: { pending: PendingAction; onClose(): void }) {
  const { api, dispatch, notify } = useDashboard();
  const [wipe, setWipe] = useState(true);
  const { spec, instance } = pending;
  return (
    <ConfirmDialog
      title={`${spec.label} instance ${instance.id}?`}
      confirmLabel={spec.name === 'restart' ? (wipe ? 'Restart and wipe' : 'Restart, keep state') : spec.label}
      destructive={spec.destructive}
      onClose={onClose}
      onConfirm={async () => {
        const result = await api.post<InstanceView>(actionPath(instance.id, spec.name, wipe));
        dispatch({ type: 'instance', instance: result });
        notify('info', `Instance ${instance.id}: ${spec.label.toLowerCase()} done (now ${result.health.state})`);
      }}
    >
      <p>{spec.explain}</p>
      {spec.name === 'restart' && (
        <fieldset className="choices">
          <legend>State</legend>
          <label>
            <input type="radio" name="wipe" value="wipe" checked={wipe} onChange={() => setWipe(true)} /> Wipe (new identity)
          </label>
          <label>
            <input type="radio" name="wipe" value="keep" checked={!wipe} onChange={() => setWipe(false)} /> Keep guards and cached consensus
          </label>
        </fieldset>
      )}
      {instance.sessions > 0 && (spec.name === 'rotate' || spec.name === 'quarantine' || spec.name === 'drain') && (
        <p className="muted">
          {instance.sessions} session{instance.sessions === 1 ? '' : 's'} will move to other instances.
        </p>
      )}
    </ConfirmDialog>
  );
}
