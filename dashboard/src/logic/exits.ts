import type { ExitsView } from '../../../shared/api/views.js';

/** With several nodes on one Redis: which node this dashboard is on, and which nodes run; null on a node of its own. */
export function fleetLine(v: ExitsView): string | null {
  if (v.fleet === null) return null;
  const others = v.fleet.nodes.filter((n) => n !== v.fleet?.node);
  return `Node ${v.fleet.node} of ${v.fleet.nodes.length} in the fleet${others.length > 0 ? ` (also ${others.join(', ')})` : ''}; exits another node holds are listed with its name.`;
}

/** What the Instances column says of an exit: this node's instances, the other node holding it, or nothing. */
export function exitHolder(e: ExitsView['exits'][number]): string {
  if (e.instances.length > 0) return e.instances.join(', ');
  return e.held_by === null ? '—' : `node ${e.held_by}`;
}

/** One line on the exit supply: what is in use, what could be, what is banned. */
export function exitsSummary(v: ExitsView): string {
  if (!v.assigning) return 'PIN_EXIT_RELAY is off: each tor picks its own exits, which instances may share.';
  const unit = v.distinct_by === 'subnet' ? '/24' : v.distinct_by;
  const plural = (n: number, word: string): string => `${n} ${word}${n === 1 ? '' : 's'}`;
  const down = v.down.filter((d) => d.state === 'down').length;
  return `${plural(v.in_use, 'exit')} in use, ${v.eligible} eligible of ${plural(v.exits.length, 'usable exit')}, room for ${v.capacity} instances with their own ${unit}; ${plural(v.bans.length, 'ban')} in force${down > 0 ? `; ${down} down` : ''}.`;
}

/** What the status column says of an exit the pool found dead: down until when, or back on probation; null when it is not. */
export function exitDownLabel(e: ExitsView['exits'][number]): { text: string; title: string } | null {
  const d = e.down;
  if (d === null) return null;
  const title = `found dead by instance ${d.instance ?? '?'} (${d.evidence.join('; ')}); strike ${d.strikes}`;
  return d.state === 'down' ? { text: `Down until ${d.until}`, title } : { text: `Probation until ${d.probation_until}`, title };
}
