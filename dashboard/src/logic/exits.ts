import type { ExitsView } from '../../../shared/api/views.js';

/** One line on the exit supply: what is in use, what could be, what is banned. */
export function exitsSummary(v: ExitsView): string {
  if (!v.assigning) return 'PIN_EXIT_RELAY is off: each tor picks its own exits, which instances may share.';
  const unit = v.distinct_by === 'subnet' ? '/24' : v.distinct_by;
  const plural = (n: number, word: string): string => `${n} ${word}${n === 1 ? '' : 's'}`;
  return `${plural(v.in_use, 'exit')} in use, ${v.eligible} eligible of ${plural(v.exits.length, 'usable exit')}, room for ${v.capacity} instances with their own ${unit}; ${plural(v.bans.length, 'ban')} in force.`;
}
