/**
 * Process inspection for the fault tests, straight from /proc: the service's worker processes
 * (told apart by the role variable the worker manager puts in their environment), liveness
 * that does not mistake a zombie for a live process, resident memory and open descriptors.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { readProcessStats } from '../../supervisor/metrics/process-stats.js';
import { ROLE_ENV } from '../../shared/ipc/protocol.js';

export class PollTimeoutError extends Error {
  constructor(what: string, timeoutMs: number, last: unknown) {
    super(`${what}: not within ${timeoutMs} ms (last seen: ${JSON.stringify(last)})`);
    this.name = 'PollTimeoutError';
  }
}

/**
 * Calls `probe` every `intervalMs` until it returns something other than undefined; a probe that
 * throws counts as "not yet" (the service may be restarting). The timeout error names the last state.
 */
export async function pollUntil<T>(
  what: string,
  probe: () => Promise<T | undefined> | T | undefined,
  timeoutMs: number,
  intervalMs = 200,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
      last = 'undefined';
    } catch (e) {
      last = (e as Error).message;
    }
    if (Date.now() > deadline) throw new PollTimeoutError(what, timeoutMs, last);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** Direct children of `pid` (every thread's children list). */
export function childPids(pid: number): number[] {
  const out = new Set<number>();
  let tasks: string[];
  try {
    tasks = fs.readdirSync(`/proc/${pid}/task`);
  } catch {
    return [];
  }
  for (const task of tasks) {
    try {
      const text = fs.readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').trim();
      for (const p of text.split(/\s+/)) if (p !== '') out.add(Number(p));
    } catch {
      // the thread ended while we looked
    }
  }
  return [...out].sort((a, b) => a - b);
}

/** The worker role from the process environment (`api`, `proxy`), or null (tor, or gone). */
export function processRole(pid: number): string | null {
  try {
    const env = fs.readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
    const line = env.find((l) => l.startsWith(`${ROLE_ENV}=`));
    return line === undefined ? null : line.slice(ROLE_ENV.length + 1);
  } catch {
    return null;
  }
}

/** Alive and not a zombie (a killed child stays in the table until its parent reaps it). */
export function isAlive(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

/** The scheduler state letter of /proc/<pid>/stat ('T' once SIGSTOPped), or null when gone. */
export function processState(pid: number): string | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  } catch {
    return null;
  }
}

export interface ServiceWorkers {
  api: number[];
  proxy: number[];
}

/** The live API and proxy worker processes of a service (children of its supervisor). */
export function serviceWorkers(servicePid: number): ServiceWorkers {
  const out: ServiceWorkers = { api: [], proxy: [] };
  for (const pid of childPids(servicePid)) {
    if (!isAlive(pid)) continue;
    const role = processRole(pid);
    if (role === 'api') out.api.push(pid);
    else if (role === 'proxy') out.proxy.push(pid);
  }
  return out;
}

/** Resident set size in bytes (VmRSS), or null when the process is gone. */
export function rssBytes(pid: number): number | null {
  return readProcessStats(pid)?.residentBytes ?? null;
}

export function openFileDescriptors(pid: number): number | null {
  return readProcessStats(pid)?.openFds ?? null;
}

/** The soft and hard RLIMIT_NOFILE of a process (from /proc/<pid>/limits). */
export function fileDescriptorLimit(pid: number): { soft: number; hard: number } {
  const m = /^Max open files\s+(\d+|unlimited)\s+(\d+|unlimited)/m.exec(fs.readFileSync(`/proc/${pid}/limits`, 'utf8'));
  if (!m) throw new Error(`no open-files limit in /proc/${pid}/limits`);
  const n = (s: string): number => (s === 'unlimited' ? Number.MAX_SAFE_INTEGER : Number(s));
  return { soft: n(m[1] as string), hard: n(m[2] as string) };
}

export class FileDescriptorLimitError extends Error {
  constructor(wanted: number, have: number, cause: string) {
    super(`need an open-files limit of ${wanted}, have ${have}, and could not raise it: ${cause}`);
    this.name = 'FileDescriptorLimitError';
  }
}

/**
 * Raises this process's RLIMIT_NOFILE (soft and hard) to at least `wanted` with prlimit(1);
 * children started afterwards (the service, its workers and tors, the test network) inherit it.
 * Raising the hard limit needs root (CAP_SYS_RESOURCE).
 */
export function ensureFileDescriptorLimit(wanted: number): { soft: number; hard: number } {
  const now = fileDescriptorLimit(process.pid);
  if (now.soft >= wanted) return now;
  const target = Math.max(wanted, now.hard);
  try {
    execFileSync('prlimit', ['--pid', String(process.pid), `--nofile=${target}:${target}`], { stdio: 'pipe' });
  } catch (e) {
    throw new FileDescriptorLimitError(wanted, now.soft, (e as Error).message);
  }
  const after = fileDescriptorLimit(process.pid);
  if (after.soft < wanted) throw new FileDescriptorLimitError(wanted, after.soft, 'prlimit had no effect');
  return after;
}

/** Sends a signal to one process by PID; false when it is already gone. */
export function signal(pid: number, sig: NodeJS.Signals): boolean {
  try {
    process.kill(pid, sig);
    return true;
  } catch {
    return false;
  }
}
