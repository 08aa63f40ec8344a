import { createContext, useContext, type Dispatch } from 'react';
import type { ApiClient } from '../api/client.js';
import type { LiveAction, LiveData } from '../logic/live-data.js';

export interface Notice {
  id: number;
  kind: 'info' | 'error';
  text: string;
}

export interface DashboardContextValue {
  api: ApiClient;
  live: LiveData;
  dispatch: Dispatch<LiveAction>;
  /** A short message in the notice area (announced to screen readers). */
  notify(kind: Notice['kind'], text: string): void;
}

export const DashboardContext = createContext<DashboardContextValue | null>(null);

export function useDashboard(): DashboardContextValue {
  const value = useContext(DashboardContext);
  if (value === null) throw new Error('useDashboard outside DashboardContext');
  return value;
}
