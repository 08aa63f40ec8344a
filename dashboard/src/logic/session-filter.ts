import type { SessionView } from '../../../shared/api/views.js';

export type SessionSortKey = 'key' | 'instance' | 'last_seen' | 'requests' | 'bytes';

/**
 * Sessions matching `query`: a case-insensitive substring of the key or of the exit IP, or
 * `#N` / `N` for the instance. `exitOf` gives the exit shown for an instance.
 */
export function filterSessions(sessions: readonly SessionView[], query: string, exitOf: (instance: number) => string): readonly SessionView[] {
  const q = query.trim().toLowerCase();
  if (q === '') return sessions;
  const instanceQuery = /^#?(\d+)$/.exec(q);
  return sessions.filter((s) => {
    if (instanceQuery && s.instance === Number(instanceQuery[1])) return true;
    return s.key.toLowerCase().includes(q) || exitOf(s.instance).includes(q);
  });
}

export function sortSessions(sessions: readonly SessionView[], key: SessionSortKey): readonly SessionView[] {
  const sorted = [...sessions];
  switch (key) {
    case 'key':
      return sorted.sort((a, b) => a.key.localeCompare(b.key));
    case 'instance':
      return sorted.sort((a, b) => a.instance - b.instance || a.key.localeCompare(b.key));
    case 'last_seen':
      return sorted.sort((a, b) => Date.parse(b.last_seen) - Date.parse(a.last_seen) || a.key.localeCompare(b.key));
    case 'requests':
      return sorted.sort((a, b) => b.requests - a.requests || a.key.localeCompare(b.key));
    case 'bytes':
      return sorted.sort((a, b) => b.bytes_up + b.bytes_down - (a.bytes_up + a.bytes_down) || a.key.localeCompare(b.key));
  }
}
