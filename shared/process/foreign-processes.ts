import { readFileSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';

/**
 * Processes this one did not spawn (so cannot wait for): read from /proc, signalled by PID.
 * Used by the supervisor for tors an earlier supervisor left (supervisor/tor/leftover-tor.ts)
 * and by the test network's reaper (internal/testnet/stale-runs.ts). Linux only: without /proc
 * nothing is found alive.
 */

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

/** The real UID of a process (/proc/PID/status), or undefined when it is gone or unreadable. */
export function processUid(pid: number): number | undefined {
  try {
    const uid = /^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return uid === undefined ? undefined : Number(uid);
  } catch {
    return undefined;
  }
}

/** How long terminateProcesses waits after SIGTERM, and after SIGKILL. */
export interface TerminationWaits {
  readonly termWaitMs: number;
  readonly killWaitMs: number;
}

const POLL_MS = 50;

/**
 * SIGTERM (and SIGCONT, for one that is stopped and could not act on it), then SIGKILL for those
 * still alive after `termWaitMs`; returns those alive after `killWaitMs` more.
 */
export async function terminateProcesses(pids: readonly number[], waits: TerminationWaits): Promise<number[]> {
  if (pids.length === 0) return [];
  signalEach(pids, 'SIGTERM');
  signalEach(pids, 'SIGCONT');
  const survivors = await aliveAfter(pids, waits.termWaitMs);
  if (survivors.length === 0) return [];
  signalEach(survivors, 'SIGKILL');
  return aliveAfter(survivors, waits.killWaitMs);
}

function signalEach(pids: readonly number[], signal: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, signal);
    } catch {
      // gone already
    }
  }
}

async function aliveAfter(pids: readonly number[], ms: number): Promise<number[]> {
  const deadline = Date.now() + ms;
  let alive = pids.filter((pid) => isProcessAlive(pid));
  while (alive.length > 0 && Date.now() < deadline) {
    await delay(POLL_MS);
    alive = alive.filter((pid) => isProcessAlive(pid));
  }
  return alive;
}
