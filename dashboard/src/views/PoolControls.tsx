import { useEffect, useState } from 'react';
import type { PoolRotateResult, ResizeResult } from '../../../shared/api/views.js';
import { useDashboard } from '../app/dashboard-context.js';
import { ConfirmDialog } from '../components/ConfirmDialog.js';
import { parsePoolSize } from '../logic/instance-actions.js';
import { MAX_POOL_SIZE } from '../../../shared/config/limits.js';

/**
 * Pool resize and pool rotate, each behind a confirmation. The size is the pool's (spares apart):
 * a resize leaves the spares as they are, and keeps room for them within MAX_POOL_SIZE.
 */
export function PoolControls({ size, spares }: { size: number; spares: number }) {
  const { api, notify } = useDashboard();
  const [text, setText] = useState(String(size));
  const [dirty, setDirty] = useState(false);
  const [dialog, setDialog] = useState<'resize' | 'rotate' | null>(null);
  // Follow the live size until the user edits the field.
  useEffect(() => {
    if (!dirty) setText(String(size));
  }, [size, dirty]);
  const largest = MAX_POOL_SIZE - spares;
  const parsed = parsePoolSize(text, largest);

  return (
    <div className="toolbar" role="group" aria-label="Pool actions">
      <form
        className="inline-form"
        onSubmit={(e) => {
          e.preventDefault();
          if (parsed.ok && parsed.size !== size) setDialog('resize');
        }}
      >
        <label className="field-inline">
          <span>Pool size</span>
          <input
            type="number"
            name="pool-size"
            min={1}
            max={largest}
            step={1}
            value={text}
            aria-invalid={!parsed.ok}
            aria-describedby={parsed.ok ? undefined : 'pool-size-error'}
            onChange={(e) => {
              setText(e.target.value);
              setDirty(true);
            }}
          />
        </label>
        <button type="submit" className="btn" disabled={!parsed.ok || parsed.size === size}>
          Resize
        </button>
        {!parsed.ok && (
          <span id="pool-size-error" className="error-text small">
            {parsed.reason}
          </span>
        )}
      </form>
      <button type="button" className="btn" onClick={() => setDialog('rotate')}>
        Rotate all
      </button>

      {dialog === 'resize' && parsed.ok && (
        <ConfirmDialog
          title={`Resize the pool to ${parsed.size}?`}
          confirmLabel="Resize"
          destructive={parsed.size < size}
          onClose={() => setDialog(null)}
          onConfirm={async () => {
            const r = await api.post<ResizeResult>('/api/pool/resize', { size: parsed.size });
            setDirty(false);
            notify('info', `Resizing from ${r.previous} to ${r.size}` + (r.adding.length ? `: starting ${r.adding.map((i) => `#${i}`).join(', ')}` : '') + (r.removing.length ? `: retiring ${r.removing.map((i) => `#${i}`).join(', ')}` : ''));
          }}
        >
          {parsed.size < size ? (
            <p>
              The pool shrinks from {size} to {parsed.size}. The highest-numbered instances are retired; their sessions move to other instances first.
              {spares > 0 && ` The ${spares === 1 ? 'spare stays' : `${spares} spares stay`}.`}
            </p>
          ) : (
            <p>
              The pool grows from {size} to {parsed.size}. New instances bootstrap in the background.
              {spares > 0 && ` The ${spares === 1 ? 'spare stays' : `${spares} spares stay`} as ${spares === 1 ? 'it is' : 'they are'}.`}
            </p>
          )}
        </ConfirmDialog>
      )}
      {dialog === 'rotate' && (
        <ConfirmDialog
          title="Rotate every instance?"
          confirmLabel="Rotate all"
          onClose={() => setDialog(null)}
          onConfirm={async () => {
            const r = await api.post<PoolRotateResult>('/api/pool/rotate');
            notify('info', r.rotating > 0 ? `Rotating ${r.rotating} instances, one at a time` : 'A rotation sweep is already in progress');
          }}
        >
          <p>Each instance gets a new circuit, one at a time (about 10 seconds apart). Sessions move off each instance while it rotates.</p>
        </ConfirmDialog>
      )}
    </div>
  );
}
