import { useState, type ReactNode } from 'react';
import { describeError } from '../logic/api-errors.js';
import { Modal } from './Modal.js';

interface ConfirmDialogProps {
  title: string;
  children: ReactNode;
  confirmLabel: string;
  destructive?: boolean;
  /** Runs the action; a rejection is shown in the dialog, which then stays open. */
  onConfirm(): Promise<void>;
  onClose(): void;
}

/** Asks before an action, runs it, and shows its error in place (409, 403 "not allowed", …). */
export function ConfirmDialog({ title, children, confirmLabel, destructive = false, onConfirm, onClose }: ConfirmDialogProps) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const run = async (): Promise<void> => {
    setBusy(true);
    setError(null);
    try {
      await onConfirm();
      onClose();
    } catch (e) {
      setError(describeError(e));
      setBusy(false);
    }
  };
  return (
    <Modal title={title} onClose={busy ? () => undefined : onClose}>
      <div className="modal-body">{children}</div>
      {error !== null && (
        <p className="error-text" role="alert">
          {error}
        </p>
      )}
      <div className="modal-actions">
        <button type="button" className="btn" onClick={onClose} disabled={busy} autoFocus>
          Cancel
        </button>
        <button type="button" className={destructive ? 'btn btn-danger' : 'btn btn-primary'} onClick={() => void run()} disabled={busy}>
          {busy ? 'Working…' : confirmLabel}
        </button>
      </div>
    </Modal>
  );
}
