import { useId, useLayoutEffect, useRef, type ReactNode } from 'react';

interface ModalProps {
  title: string;
  onClose(): void;
  children: ReactNode;
  /** Extra class for the dialog element. */
  className?: string;
}

/**
 * A modal built on the native <dialog>: showModal() makes the rest of the page inert (focus
 * stays inside), Escape raises `cancel` (handled as close), and closing returns focus to the
 * control that opened it.
 */
export function Modal({ title, onClose, children, className }: ModalProps) {
  const ref = useRef<HTMLDialogElement>(null);
  const titleId = useId();
  const onCloseRef = useRef(onClose);
  onCloseRef.current = onClose;
  // Layout effect: the dialog must still be in the document when it is closed, or the browser
  // cannot hand focus back; the opener is also refocused explicitly for the same reason.
  useLayoutEffect(() => {
    const dialog = ref.current;
    if (dialog === null) return;
    const opener = document.activeElement instanceof HTMLElement ? document.activeElement : null;
    if (!dialog.open) dialog.showModal();
    const cancel = (e: Event): void => {
      e.preventDefault();
      onCloseRef.current();
    };
    dialog.addEventListener('cancel', cancel);
    return () => {
      dialog.removeEventListener('cancel', cancel);
      if (dialog.open) dialog.close();
      if (opener?.isConnected) opener.focus();
    };
  }, []);
  return (
    <dialog ref={ref} aria-labelledby={titleId} className={className ? `modal ${className}` : 'modal'}>
      <h2 id={titleId} className="modal-title">
        {title}
      </h2>
      {children}
    </dialog>
  );
}
