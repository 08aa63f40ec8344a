import { useState } from 'react';

/** Copies `text`; falls back to selecting `fallbackTarget` when the clipboard API is refused (plain HTTP). */
export function CopyButton({ text, fallbackTarget, label = 'Copy' }: { text: string; fallbackTarget: () => HTMLElement | null; label?: string }) {
  const [state, setState] = useState<'idle' | 'copied' | 'select'>('idle');
  const copy = async (): Promise<void> => {
    try {
      await navigator.clipboard.writeText(text);
      setState('copied');
    } catch {
      const el = fallbackTarget();
      if (el !== null) {
        const range = document.createRange();
        range.selectNodeContents(el);
        const sel = window.getSelection();
        sel?.removeAllRanges();
        sel?.addRange(range);
      }
      setState('select');
    }
  };
  return (
    <button type="button" className="btn" onClick={() => void copy()} aria-live="polite">
      {state === 'copied' ? 'Copied' : state === 'select' ? 'Selected: press Ctrl+C' : label}
    </button>
  );
}
