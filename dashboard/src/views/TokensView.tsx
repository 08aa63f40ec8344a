import { useRef, useState, type FormEvent } from 'react';
import type { CreatedToken, TokenRecord } from '../../../shared/auth/token-record.js';
import { useDashboard } from '../app/dashboard-context.js';
import { ConfirmDialog } from '../components/ConfirmDialog.js';
import { CopyButton } from '../components/CopyButton.js';
import { Modal } from '../components/Modal.js';
import { describeError } from '../logic/api-errors.js';
import { useApiResource } from '../hooks/use-api-resource.js';
import { formatUnixUtc } from '../logic/format.js';

type Scope = TokenRecord['scope'];

export function TokensView() {
  const { api, notify } = useDashboard();
  const { data: tokens, error, reload: load } = useApiResource<readonly TokenRecord[]>('/api/tokens');
  const [name, setName] = useState('');
  const [scope, setScope] = useState<Scope>('proxy');
  const [creating, setCreating] = useState(false);
  const [createError, setCreateError] = useState<string | null>(null);
  const [created, setCreated] = useState<CreatedToken | null>(null);
  const [revoking, setRevoking] = useState<TokenRecord | null>(null);
  const secretRef = useRef<HTMLElement>(null);

  const create = async (e: FormEvent): Promise<void> => {
    e.preventDefault();
    setCreating(true);
    setCreateError(null);
    try {
      const token = await api.post<CreatedToken>('/api/tokens', { name: name.trim(), scope });
      setCreated(token);
      setName('');
      await load();
    } catch (err) {
      setCreateError(describeError(err));
    } finally {
      setCreating(false);
    }
  };

  return (
    <div className="stack">
      <section className="panel" aria-labelledby="new-token-title">
        <h2 id="new-token-title" className="panel-title">
          New token
        </h2>
        <form className="inline-form" onSubmit={(e) => void create(e)}>
          <label className="field-inline grow">
            <span>Name</span>
            <input name="token-name" value={name} onChange={(e) => setName(e.target.value)} required maxLength={64} placeholder="e.g. scraper-eu" />
          </label>
          <label className="field-inline">
            <span>Scope</span>
            <select name="token-scope" value={scope} onChange={(e) => setScope(e.target.value as Scope)}>
              <option value="proxy">proxy — proxy traffic and own session</option>
              <option value="admin">admin — everything</option>
            </select>
          </label>
          <button type="submit" className="btn btn-primary" disabled={creating || name.trim() === ''}>
            {creating ? 'Creating…' : 'Create token'}
          </button>
        </form>
        {createError !== null && (
          <p className="error-text" role="alert">
            {createError}
          </p>
        )}
      </section>

      {error !== null && (
        <p className="error-text" role="alert">
          {error}
        </p>
      )}
      {tokens !== null && (
        <div className="table-wrap">
          <table className="table tokens">
            <caption className="sr-only">Tokens</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">ID</th>
                <th scope="col">Scope</th>
                <th scope="col">Source</th>
                <th scope="col">Created (UTC)</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {tokens.map((t) => (
                <tr key={t.id} data-token={t.id}>
                  <th scope="row">{t.name}</th>
                  <td>
                    <code>{t.id}</code>
                  </td>
                  <td>
                    <span className={`badge scope-${t.scope}`}>{t.scope}</span>
                  </td>
                  <td title={t.source === 'auth-disabled' ? 'Issued while AUTH_DISABLED: kept in memory only, gone at the next start' : undefined}>{t.source}</td>
                  <td className="nowrap">{formatUnixUtc(t.created_at)}</td>
                  <td>
                    <button
                      type="button"
                      className="btn btn-small btn-danger-quiet"
                      disabled={t.source === 'config'}
                      title={t.source === 'config' ? 'Set by PROXY_TOKEN: change the configuration to remove it' : 'Revoke at once'}
                      aria-label={`Revoke token ${t.name}`}
                      onClick={() => setRevoking(t)}
                    >
                      Revoke
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          {tokens.length === 0 && <p className="muted pad">No tokens.</p>}
        </div>
      )}

      {created !== null && (
        <Modal title="Token created" onClose={() => setCreated(null)} className="secret-dialog">
          <p>
            Copy the secret of <strong>{created.name}</strong> ({created.scope}) now. It is shown <strong>only once</strong>: only a digest is stored.
          </p>
          <div className="secret">
            <code ref={secretRef} data-secret>
              {created.secret}
            </code>
            <CopyButton text={created.secret} fallbackTarget={() => secretRef.current} />
          </div>
          <div className="modal-actions">
            <button type="button" className="btn btn-primary" onClick={() => setCreated(null)}>
              Done
            </button>
          </div>
        </Modal>
      )}
      {revoking !== null && (
        <ConfirmDialog
          title={`Revoke token ${revoking.name}?`}
          confirmLabel="Revoke"
          destructive
          onClose={() => setRevoking(null)}
          onConfirm={async () => {
            await api.delete(`/api/tokens/${encodeURIComponent(revoking.id)}`);
            notify('info', `Token ${revoking.name} revoked`);
            await load();
          }}
        >
          <p>
            Clients using <code>{revoking.id}</code> ({revoking.scope}) are refused from now on. This cannot be undone.
          </p>
        </ConfirmDialog>
      )}
    </div>
  );
}
