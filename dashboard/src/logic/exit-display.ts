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
