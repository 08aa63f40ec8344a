import { useCallback, useEffect, useState } from 'react';
import { useDashboard } from '../app/dashboard-context.js';
import { UnauthorizedError, describeError } from '../logic/api-errors.js';

export interface ApiResource<T> {
  /** null until the first answer. */
  data: T | null;
  /** The last failure's description; null after a success. A 401 is left to the sign-out flow. */
  error: string | null;
  reload: () => Promise<void>;
}

/** GET `path` once on mount (and every `refreshMs` when given), for views that are not in the live stream. */
export function useApiResource<T>(path: string, refreshMs?: number): ApiResource<T> {
  const { api } = useDashboard();
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState<string | null>(null);
  const reload = useCallback(async () => {
    try {
      setData(await api.get<T>(path));
      setError(null);
    } catch (e) {
      if (!(e instanceof UnauthorizedError)) setError(describeError(e));
    }
  }, [api, path]);
  useEffect(() => {
    void reload();
    if (refreshMs === undefined) return undefined;
    const timer = setInterval(() => void reload(), refreshMs);
    return () => clearInterval(timer);
  }, [reload, refreshMs]);
  return { data, error, reload };
}
