import { readFileSync } from 'node:fs';

/**
 * Kernel start time of a process (clock ticks since boot, field 22 of /proc/PID/stat), or
 * undefined when it does not exist. Pairing it with the PID tells a live owner from an
 * unrelated process that later received the same PID.
 */
export function processStartTime(pid: number): string | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // The command name (field 2) is in parentheses and may itself contain spaces or ')'.
  const afterName = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // afterName[0] is field 3 (state); field 22 is therefore afterName[19].
  const state = afterName[0];
  if (state === 'Z' || state === 'X') return undefined;
  return afterName[19];
}

export function isProcessAlive(pid: number, expectedStartTime?: string): boolean {
  const start = processStartTime(pid);
  if (start === undefined) return false;
  return expectedStartTime === undefined || start === expectedStartTime;
}

/** argv of a process from /proc/PID/cmdline, or undefined when it is gone or unreadable. */
export function processCommandLine(pid: number): string[] | undefined {
  try {
    const raw = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    if (raw.length === 0) return undefined;
    return raw.split('\0').filter((part) => part.length > 0);
  } catch {
    return undefined;
  }
}
