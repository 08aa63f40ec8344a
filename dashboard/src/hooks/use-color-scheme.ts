import { useEffect, useState } from 'react';

/** The system colour scheme; the dashboard follows it (charts read their colours from CSS). */
export function useColorScheme(): 'light' | 'dark' {
  const query = '(prefers-color-scheme: dark)';
  const [dark, setDark] = useState(() => window.matchMedia(query).matches);
  useEffect(() => {
    const mql = window.matchMedia(query);
    const update = (): void => setDark(mql.matches);
    mql.addEventListener('change', update);
    return () => mql.removeEventListener('change', update);
  }, []);
  return dark ? 'dark' : 'light';
}
