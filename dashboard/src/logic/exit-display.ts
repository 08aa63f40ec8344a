import type { InstanceView } from '../../../shared/api/views.js';

/**
 * What the exit cell of an instance shows. A rotation empties exit_ip and names the
 * discarded exit in retired_exit_ip for a second or two; before bootstrap there is neither.
 */
export type ExitDisplay =
  | { kind: 'current'; ip: string; country: string; nickname: string; confirmed: boolean }
  | { kind: 'retired'; ip: string }
  | { kind: 'none' };

export function exitDisplay(i: Pick<InstanceView, 'exit_ip' | 'exit_country' | 'exit_nickname' | 'exit_confirmed' | 'retired_exit_ip'>): ExitDisplay {
  if (i.exit_ip !== '') {
    return { kind: 'current', ip: i.exit_ip, country: i.exit_country, nickname: i.exit_nickname, confirmed: i.exit_confirmed };
  }
  if (i.retired_exit_ip !== '') return { kind: 'retired', ip: i.retired_exit_ip };
  return { kind: 'none' };
}

/**
 * How an instance's exit IP is known (docs/api.md, "What sites see"): measured through the exit,
 * read from the Tor exit list, or only the address the relay publishes (sites may see another).
 */
export function exitIpOrigin(i: Pick<InstanceView, 'exit_ip_source' | 'exit_ip_measured_at'>, formatTime: (iso: string) => string): string {
  const at = i.exit_ip_measured_at === null ? '' : `, ${formatTime(i.exit_ip_measured_at)} UTC`;
  switch (i.exit_ip_source) {
    case 'probe':
      return `measured through the exit${at}`;
    case 'exit_list':
      return `the Tor exit list${at}`;
    case 'published':
      return 'the address the relay publishes (not measured)';
    default:
      return '–';
  }
}
