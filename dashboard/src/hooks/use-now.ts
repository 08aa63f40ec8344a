import { useEffect, useState } from 'react';

/** The current time, refreshed every `periodMs` (for "5s ago" labels and countdowns). */
export function useNow(periodMs = 1_000): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    const t = window.setInterval(() => setNow(Date.now()), periodMs);
    return () => window.clearInterval(t);
  }, [periodMs]);
  return now;
}
