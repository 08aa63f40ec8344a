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

/** The countries a session belongs to: where it leaves from, and those its username asked for. */
export function countriesOf(s: SessionView): string[] {
  return [...new Set([s.exit_country, ...s.params.countries].filter((c) => c !== ''))];
}

/** Every country the sessions belong to, sorted: the choices of the country filter. */
export function sessionCountries(sessions: readonly SessionView[]): string[] {
  return [...new Set(sessions.flatMap(countriesOf))].sort();
}

/** Sessions leaving from `country` or asking for it; all when `country` is ''. */
export function filterSessionsByCountry(sessions: readonly SessionView[], country: string): readonly SessionView[] {
  if (country === '') return sessions;
  return sessions.filter((s) => countriesOf(s).includes(country));
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
