/** The dashboard's views, addressed by the URL fragment (#/instances) so reload and back work. */
export const VIEWS = ['overview', 'instances', 'exits', 'sessions', 'events', 'tokens', 'timeline'] as const;
export type ViewName = (typeof VIEWS)[number];

export const VIEW_TITLES: Record<ViewName, string> = {
  overview: 'Overview',
  instances: 'Instances',
  exits: 'Exits',
  sessions: 'Sessions',
  events: 'Events',
  tokens: 'Tokens',
  timeline: 'Timeline',
};

export function viewFromHash(hash: string): ViewName {
  const name = hash.replace(/^#\/?/, '').split(/[/?]/)[0] ?? '';
  return (VIEWS as readonly string[]).includes(name) ? (name as ViewName) : 'overview';
}

export function hashOf(view: ViewName): string {
  return `#/${view}`;
}
